import { Config, ConfigProvider, Context, Duration, Effect, Layer, LogLevel, Option, Schema, SchemaIssue } from "effect"
import { readFileSync, statSync } from "node:fs"
import { availableParallelism } from "node:os"
import { dirname } from "node:path"
import { metricsListener } from "../Observability/ObservabilityConfig.js"
import { parseTrustedProxies } from "./TrustedProxies.js"

export type Environment = "production" | "staging"

/** `DATABASE_URL` when it is unset: the one database whose folder a first start makes. */
export const defaultDatabaseUrl = "data/petstore.db"

const checked = <A>(schema: Schema.Codec<A, string>) => (name: string, message: string, valid: (value: A) => boolean) =>
  Config.schema(schema.check(Schema.makeFilter((value: A) => valid(value) || message)), name)

const text = checked(Schema.String)

const parsed = <A>(name: string, message: string, parse: (value: string) => A | undefined, fallback: A) =>
  text(name, message, (value) => parse(value) !== undefined).pipe(
    Config.map((value) => parse(value)!),
    Config.withDefault(fallback)
  )

const number = (name: string, message: string, valid: (n: number) => boolean, fallback: number) =>
  checked(Schema.NumberFromString)(name, message, valid).pipe(Config.withDefault(fallback))

const integerFrom = (min: number, max = Infinity) => (n: number) => Number.isInteger(n) && n >= min && n <= max

const positiveInteger = (name: string, fallback: number) =>
  number(name, "must be a positive integer", integerFrom(1), fallback)

const seconds = (name: string, message: string, valid: (n: number) => boolean, fallback: number) =>
  Config.map(number(name, message, valid, fallback), Duration.seconds)

const upToAnHour = (name: string, fallback: number) =>
  seconds(name, "must be a number of seconds from 0 to 3600", (n) => n >= 0 && n <= 3600, fallback)

/** Under a request's deadline, which Bun's 10 s idle timeout bounds: an answer must come before that. */
const belowTen = (name: string, fallback: number) =>
  seconds(name, "must be a number of seconds above 0 and below 10", (n) => n > 0 && n < 10, fallback)

export const isHttpUrl = (value: string) => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

/** An absolute http(s) URL, without the slashes that may end it. */
export const httpUrl = (name: string) =>
  Config.map(text(name, "must be an absolute http(s) URL", isHttpUrl), (url) => url.replace(/\/+$/, ""))

/** A failed check of `name` that no one variable's rule could make (it depends on another's value). */
const invalidAt = (name: string, message: string) =>
  Config.fail(new Schema.SchemaError(new SchemaIssue.Pointer([name], new SchemaIssue.InvalidValue({ message }))))

const portSetting = number("PORT", "must be a port number from 1 to 65535", integerFrom(1, 65535), 3000)
const hostSetting = Config.String("HOST").pipe(Config.withDefault("0.0.0.0"))

const databaseUrlRule = (url: string): string | undefined =>
  url.trim().length === 0 || url.includes(":memory:") ||
    /^(?!sqlite:|file:|postgres:\/\/|postgresql:\/\/)[a-z][a-z0-9+.-]*:\/\//i.test(url)
    ? "must be a postgres:// URL, or a SQLite file path, sqlite:path or file:path (not :memory:: the migrations and the service share the file)"
    : sqliteFilename(url).trim().length === 0
    ? "names no SQLite file: the path after sqlite: or file: is empty"
    : databaseUrlProblem(url)

/** `DATABASE_URL`, or the file `DATABASE_URL_FILE` names (a password kept out of the environment); not both. */
export const databaseUrlSetting: Config.Config<Option.Option<{ readonly url: string; readonly file?: string }>> = Config
  .all({ url: Config.option(Config.String("DATABASE_URL")), file: Config.option(Config.String("DATABASE_URL_FILE")) })
  .pipe(Config.flatMap(({ file, url }) => {
    if (Option.isNone(file)) return Config.succeed(Option.map(url, (url) => ({ url })))
    if (Option.isSome(url)) return invalidAt("DATABASE_URL_FILE", "is set as well as DATABASE_URL: set one of them")
    try {
      // Without the newline that ends its last line (`echo`'s, an editor's).
      const contents = readFileSync(file.value, "utf8").replace(/\r?\n$/, "")
      return Config.succeed(Option.some({ url: contents, file: file.value }))
    } catch (cause) {
      // Some messages end with the path ("…, open '/etc/…'"), which the line names once, before them.
      const reason = cause instanceof Error ? cause.message.replace(/, \w+ '.*'$/, "") : String(cause)
      return invalidAt("DATABASE_URL_FILE", `names ${file.value}, which cannot be read (${reason})`)
    }
  }))

const environmentOf = (v: string): Environment | undefined => v === "production" || v === "staging" ? v : undefined

/** `LOG_LEVEL`, in any case: the levels' names, `WARNING` for warn, `OFF` for none. */
const logLevelOf = (value: string): LogLevel.LogLevel | undefined => {
  const name = value.trim().toUpperCase()
  return name === "WARNING" ? "Warn" : name === "OFF" ? "None" : LogLevel.values.find((l) => l.toUpperCase() === name)
}

const originsOf = (list: string): ReadonlyArray<string> | undefined => {
  const origins = list.split(",").map((origin) => origin.trim().replace(/\/+$/, "")).filter((o) => o !== "")
  return origins.every(isHttpUrl) ? origins : undefined
}

const workersOf = (value: string) => {
  const n = value.trim() === "auto" ? availableParallelism() : Number(value)
  return integerFrom(1, 256)(n) ? n : undefined
}

/** The service's settings, read from the environment and checked once at start (docs/configuration.md). */
const config = Config.all({
  port: portSetting,
  host: hostSetting,
  // A `postgres://` URL, or a SQLite file; the default is not checked: its folder is the one a first start makes.
  databaseUrl: databaseUrlSetting.pipe(Config.flatMap(Option.match({
    onNone: () => Config.succeed(defaultDatabaseUrl),
    onSome: ({ file, url }) => {
      const problem = databaseUrlRule(url)
      return problem === undefined
        ? Config.succeed(url)
        : file === undefined
        ? invalidAt("DATABASE_URL", problem)
        : invalidAt("DATABASE_URL_FILE", `the URL in ${file} ${problem}`)
    }
  }))),
  environment: parsed("PETSTORE_ENV", "must be production or staging", environmentOf, "staging"),
  publicBaseUrl: Config.option(httpUrl("PUBLIC_BASE_URL")),
  productionUrl: httpUrl("PETSTORE_PRODUCTION_URL").pipe(Config.withDefault("https://petstore.example.com")),
  stagingUrl: httpUrl("PETSTORE_STAGING_URL").pipe(Config.withDefault("https://staging.petstore.example.com")),
  rateLimit: Config.all({
    perSecond: number("RATE_LIMIT_PER_SECOND", "must be a positive number", (n) => n > 0, 100),
    burst: positiveInteger("RATE_LIMIT_BURST", 200)
  }),
  authFailuresPerMinute: positiveInteger("AUTH_FAILURES_PER_MINUTE", 20),
  trustedProxies: parsed(
    "TRUSTED_PROXIES",
    "must be comma-separated IP addresses or CIDR ranges, such as 10.0.0.0/8, 192.0.2.7, fd00::/8",
    (value) => {
      const { invalid, ranges } = parseTrustedProxies(value)
      return invalid.length === 0 ? ranges : undefined
    },
    []
  ),
  corsOrigins: parsed("CORS_ORIGINS", "must be a comma-separated list of http(s) origins", originsOf, []),
  logLevel: parsed("LOG_LEVEL", "must be one of all, fatal, error, warn, info, debug, trace, off", logLevelOf, "Info"),
  workers: parsed("WORKERS", "must be auto or a whole number of processes from 1 to 256", workersOf, 1),
  // Serving with /readyz at 503, so that a load balancer takes the instance out before it refuses anything.
  stopGrace: upToAnHour("STOP_GRACE_SECONDS", 5),
  drainTimeout: upToAnHour("DRAIN_TIMEOUT_SECONDS", 10),
  requestTimeout: belowTen("REQUEST_TIMEOUT_SECONDS", 5),
  databaseConnectTimeout: belowTen("DATABASE_CONNECT_TIMEOUT_SECONDS", 3),
  // One statement on PostgreSQL; the wait for another process's lock on SQLite.
  databaseStatementTimeout: belowTen("DATABASE_STATEMENT_TIMEOUT_SECONDS", 3),
  databaseStartTimeout: upToAnHour("DATABASE_START_TIMEOUT_SECONDS", 30),
  // Whole seconds: the kernel's keepalive idle time is set in seconds.
  databaseKeepAlive: seconds(
    "DATABASE_KEEPALIVE_SECONDS",
    "must be a whole number of seconds from 1 to 300",
    integerFrom(1, 300),
    10
  )
}).pipe(
  // A wait for a PostgreSQL connection ends (a pool's error, logged) before the request's deadline, which says less.
  Config.flatMap((config) =>
    !isPostgresUrl(config.databaseUrl) || Duration.isLessThan(config.databaseConnectTimeout, config.requestTimeout)
      ? Config.succeed(config)
      : invalidAt(
        "DATABASE_CONNECT_TIMEOUT_SECONDS",
        `must be below REQUEST_TIMEOUT_SECONDS (${Duration.toSeconds(config.requestTimeout)} s; it is ` +
          `${Duration.toSeconds(config.databaseConnectTimeout)} s), so that a request waiting for a database ` +
          "connection is answered database_unavailable before its deadline"
      )
  ),
  // The OpenAPI `servers`: this instance first, so the docs page and its samples call it; then the other environment.
  Config.map(({ environment, productionUrl, publicBaseUrl, stagingUrl, ...config }) => {
    const self = Option.getOrElse(publicBaseUrl, () => `http://localhost:${config.port}`)
    const servers: ReadonlyArray<{ readonly url: string; readonly description: string }> = [
      { url: self, description: `This instance (${environment})` },
      environment === "production"
        ? { url: stagingUrl, description: "Staging" }
        : { url: productionUrl, description: "Production" }
    ]
    return { ...config, environment, publicBaseUrl: self, servers }
  })
)

export class AppConfig extends Context.Service<AppConfig, Config.Success<typeof config>>()("petstore/AppConfig") {
  static readonly config = config

  static readonly layer = Layer.effect(AppConfig, config)

  /** Settings for tests and for composing the service in code: the defaults, read from no environment. */
  static readonly make = (overrides: Partial<AppConfig["Service"]> = {}) =>
    Layer.effect(
      AppConfig,
      config.parse(ConfigProvider.fromEnv({
        env: {
          HOST: "127.0.0.1",
          PETSTORE_ENV: overrides.environment ?? "staging",
          PUBLIC_BASE_URL: overrides.publicBaseUrl ?? "http://localhost:3000"
        }
      })).pipe(Effect.orDie, Effect.map((parsed) => ({ ...parsed, ...overrides })))
    )
}

/** Whether two listen addresses take connections to one address: the same, or either every address. */
const overlap = (a: string, b: string) =>
  [a, b].some((host) => ["0.0.0.0", "::"].includes(host.trim())) || a.trim().toLowerCase() === b.trim().toLowerCase()

/** One port on overlapping addresses refused at start naming both settings, not by Bun's "Is port … in use?". */
export const listenersApart: Config.Config<void> = Config.all({
  port: portSetting,
  host: hostSetting,
  metrics: metricsListener
}).pipe(
  Config.flatMap(({ host, metrics, port }) =>
    Option.isSome(metrics) && metrics.value.port === port && overlap(metrics.value.host, host)
      ? invalidAt(
        "METRICS_PORT",
        `must differ from PORT where METRICS_HOST (${metrics.value.host}) and HOST (${host}) overlap; both are ${port}`
      )
      : Config.succeed(undefined)
  )
)

/** A configuration error in one line: `Invalid data at WORKERS: "must be auto or a whole number of …"`. */
export const describeConfigError = (error: Config.ConfigError): string => {
  const cause = error.cause
  if (!Schema.isSchemaError(cause)) return String(cause)
  const [first] = SchemaIssue.makeFormatterStandardSchemaV1()(cause.issue).issues
  if (first === undefined) return cause.message
  const path = (first.path ?? []).map((key) => String(typeof key === "object" ? key.key : key)).join(".")
  return path === "" ? first.message : `Invalid data at ${path}: ${JSON.stringify(first.message)}`
}

/** The SQLite file a `DATABASE_URL` names: a path, `sqlite:path` or `file:path`. */
export const sqliteFilename = (databaseUrl: string): string => databaseUrl.replace(/^(sqlite|file):(\/\/)?/, "")

export const isPostgresUrl = (databaseUrl: string): boolean => /^postgres(ql)?:\/\//i.test(databaseUrl)

/** Why a database URL is unusable, never quoting it (a password); a missing folder would get a new, empty store. */
export const databaseUrlProblem = (value: string): string | undefined => {
  if (isPostgresUrl(value)) {
    // A password's unencoded `/ ? # @` ends the userinfo early: drivers then disagree on where the host begins.
    const rest = value.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
    const at = rest.lastIndexOf("@")
    return (at !== -1 && /[/?#@]/.test(rest.slice(0, at))) || !URL.canParse(value)
      ? "is not a valid postgres:// URL (a password's reserved characters, such as @ / ? #, must be percent-encoded)"
      : undefined
  }
  const folder = dirname(sqliteFilename(value))
  try {
    const found = statSync(folder, { throwIfNoEntry: false })
    return found === undefined
      ? `names a file in ${folder}, a folder that does not exist: create the folder, or correct the path`
      : found.isDirectory()
      ? undefined
      : `names a file in ${folder}, which is not a folder: correct the path`
  } catch (cause) {
    return `names a file in ${folder}, which cannot be reached (${cause instanceof Error ? cause.message : cause})`
  }
}
