import { Config, Context, Duration, Layer, type LogLevel, Option, Schema, SchemaIssue } from "effect"
import { readFileSync, statSync } from "node:fs"
import { availableParallelism } from "node:os"
import { dirname } from "node:path"
import { metricsListener } from "../Observability/ObservabilityConfig.js"
import { type IpRange, parseTrustedProxies } from "../Request/ClientAddress.js"

export type Environment = "production" | "staging"

/** An entry of the OpenAPI `servers` list. */
export interface Server {
  readonly url: string
  readonly description: string
}

/** `DATABASE_URL` when it is unset: the one database whose folder a first start makes. */
export const defaultDatabaseUrl = "data/petstore.db"

/**
 * The OpenAPI `servers`: this instance first, labelled with its environment, so the docs page
 * and its samples call the instance serving them; then the other environment.
 */
const serversFor = (
  environment: Environment,
  self: string,
  addresses: { readonly production: string; readonly staging: string }
): ReadonlyArray<Server> => {
  const other = environment === "production" ? "staging" : "production"
  return [
    { url: self, description: `This instance (${environment})` },
    { url: addresses[other], description: other === "production" ? "Production" : "Staging" }
  ]
}

/**
 * The variable `name` read with `schema` and checked by `rule`, which answers `true` or the
 * message naming what the value must be; a failed check names the variable (`describeConfigError`).
 */
const checked = <A>(name: string, schema: Schema.Codec<A, string>, rule: (value: A) => true | string) =>
  Config.schema(schema.check(Schema.makeFilter((value: A) => rule(value))), name)

const rule = <A>(message: string, validation: (value: A) => boolean) => (value: A): true | string =>
  validation(value) || message

const httpUrl = (name: string) =>
  checked(name, Schema.String, rule("must be an absolute http(s) URL", isHttpUrl)).pipe(
    Config.map((url) => url.replace(/\/+$/, ""))
  )

/** A failed check of `name` that no one variable's rule could make (it depends on another's value). */
const invalidAt = (name: string, message: string) =>
  Config.fail(new Schema.SchemaError(new SchemaIssue.Pointer([name], new SchemaIssue.InvalidValue({ message }))))

/** `PORT`, the API's port; `listenersApart` reads it too. */
export const portSetting = checked(
  "PORT",
  Schema.NumberFromString,
  rule("must be a port number from 1 to 65535", (p) => Number.isInteger(p) && p >= 1 && p <= 65535)
).pipe(Config.withDefault(3000))

/** `HOST`, the API's address. */
export const hostSetting = Config.String("HOST").pipe(Config.withDefault("0.0.0.0"))

/** What `DATABASE_URL` must be, as a message following its name, or `true`. */
const databaseUrlRule = (url: string): true | string =>
  url.trim().length === 0 || url.includes(":memory:") ||
    /^(?!sqlite:|file:|postgres:\/\/|postgresql:\/\/)[a-z][a-z0-9+.-]*:\/\//i.test(url)
    ? "must be a postgres:// URL, or a SQLite file path, sqlite:path or file:path (not :memory:: the migrations and the service share the file)"
    : sqliteFilename(url).trim().length === 0
    ? "names no SQLite file: the path after sqlite: or file: is empty"
    : databaseUrlProblem(url) ?? true

/** A file's content without the newline that ends its last line (`echo`'s, an editor's). */
const readSetting = (file: string): string => readFileSync(file, "utf8").replace(/\r?\n$/, "")

/**
 * The database URL as given, unchecked: `DATABASE_URL`, or the content of the file
 * `DATABASE_URL_FILE` names (a systemd credential, a mounted secret), which keeps a password out of
 * the environment that every child process inherits and `/proc/PID/environ` shows; none when
 * neither is set. Both set is refused, as which should win would be a guess; so is a file that
 * cannot be read.
 */
export const databaseUrlSetting: Config.Config<Option.Option<{ readonly url: string; readonly file?: string }>> = Config
  .all({ url: Config.option(Config.String("DATABASE_URL")), file: Config.option(Config.String("DATABASE_URL_FILE")) })
  .pipe(Config.flatMap(({ file, url }) => {
    if (Option.isNone(file)) return Config.succeed(Option.map(url, (url) => ({ url })))
    if (Option.isSome(url)) return invalidAt("DATABASE_URL_FILE", "is set as well as DATABASE_URL: set one of them")
    try {
      return Config.succeed(Option.some({ url: readSetting(file.value), file: file.value }))
    } catch (cause) {
      // Some messages end with the path ("…, open '/etc/…'"), which the line names once, before them.
      const reason = cause instanceof Error ? cause.message.replace(/, \w+ '.*'$/, "") : String(cause)
      return invalidAt("DATABASE_URL_FILE", `names ${file.value}, which cannot be read (${reason})`)
    }
  }))

/** A number of seconds, checked by `validation`, as a `Duration`. */
const seconds = (name: string, message: string, validation: (n: number) => boolean, defaultSeconds: number) =>
  checked(name, Schema.NumberFromString, rule(message, validation)).pipe(
    Config.withDefault(defaultSeconds),
    Config.map(Duration.seconds)
  )

/** A database timeout: under a request's deadline, which Bun's 10 s idle timeout bounds. */
const databaseSeconds = (name: string, defaultSeconds: number) =>
  seconds(name, "must be a number of seconds above 0 and below 10", (n) => n > 0 && n < 10, defaultSeconds)

/** `LOG_LEVEL`, in any case: the levels' names, `OFF` for none. */
const logLevels: Record<string, LogLevel.LogLevel> = {
  ALL: "All",
  FATAL: "Fatal",
  ERROR: "Error",
  WARN: "Warn",
  WARNING: "Warn",
  INFO: "Info",
  DEBUG: "Debug",
  TRACE: "Trace",
  OFF: "None",
  NONE: "None"
}

const originsOf = (list: string): ReadonlyArray<string> =>
  list.split(",").map((origin) => origin.trim().replace(/\/+$/, "")).filter((o) => o !== "")

const workersOf = (value: string) => value.trim() === "auto" ? availableParallelism() : Number(value)

/** The service's settings, read from the environment and checked once at start. */
export class AppConfig extends Context.Service<AppConfig, {
  readonly port: number
  readonly host: string
  /** A `postgres://` URL, or a SQLite file: a path, `sqlite:path` or `file:path`. */
  readonly databaseUrl: string
  readonly environment: Environment
  /** Where clients reach this instance; used in `Link` headers. */
  readonly publicBaseUrl: string
  /** The OpenAPI document's `servers`: this instance, then the other environment. */
  readonly servers: ReadonlyArray<Server>
  /** Requests per API key: a token bucket refilled at `perSecond`, holding `burst`. */
  readonly rateLimit: { readonly perSecond: number; readonly burst: number }
  /** Failed authentications allowed per client address and minute (also the burst). */
  readonly authFailuresPerMinute: number
  /** Proxies whose forwarding headers name the client (`TRUSTED_PROXIES`); none by default. */
  readonly trustedProxies: ReadonlyArray<IpRange>
  /** Browser origins allowed to call the API (CORS); none unless listed. */
  readonly corsOrigins: ReadonlyArray<string>
  readonly logLevel: LogLevel.LogLevel
  /** Server processes sharing the port (`WORKERS`; `auto` is one per core). */
  readonly workers: number
  /**
   * How long a stop keeps serving with `/readyz` at 503, so that a load balancer takes the
   * instance out before it refuses anything (`STOP_GRACE_SECONDS`).
   */
  readonly stopGrace: Duration.Duration
  /** How long a stop lets the requests in flight finish (`DRAIN_TIMEOUT_SECONDS`). */
  readonly drainTimeout: Duration.Duration
  /** How long a request may take before it is answered 503 (`REQUEST_TIMEOUT_SECONDS`). */
  readonly requestTimeout: Duration.Duration
  /** PostgreSQL: how long opening a connection may take (`DATABASE_CONNECT_TIMEOUT_SECONDS`). */
  readonly databaseConnectTimeout: Duration.Duration
  /**
   * How long one statement may run on PostgreSQL, and wait for another process's lock on
   * SQLite (`DATABASE_STATEMENT_TIMEOUT_SECONDS`).
   */
  readonly databaseStatementTimeout: Duration.Duration
  /** How long a start keeps retrying a database that refuses connections (`DATABASE_START_TIMEOUT_SECONDS`). */
  readonly databaseStartTimeout: Duration.Duration
  /**
   * PostgreSQL: how long a connection may sit silent before TCP keepalive probes it
   * (`DATABASE_KEEPALIVE_SECONDS`); a host that answers none of the probes ends it.
   */
  readonly databaseKeepAlive: Duration.Duration
}>()("petstore/AppConfig") {
  static readonly config = Config.all({
    port: portSetting,
    host: hostSetting,
    // The default is not checked: its folder is the one a first start makes.
    databaseUrl: databaseUrlSetting.pipe(Config.flatMap(Option.match({
      onNone: () => Config.succeed(defaultDatabaseUrl),
      onSome: ({ file, url }) => {
        const problem = databaseUrlRule(url)
        return problem === true
          ? Config.succeed(url)
          : file === undefined
          ? invalidAt("DATABASE_URL", problem)
          : invalidAt("DATABASE_URL_FILE", `the URL in ${file} ${problem}`)
      }
    }))),
    environment: checked(
      "PETSTORE_ENV",
      Schema.String,
      rule("must be production or staging", (value) => value === "production" || value === "staging")
    ).pipe(Config.map((value) => value as Environment), Config.withDefault("staging" as Environment)),
    publicBaseUrl: Config.option(httpUrl("PUBLIC_BASE_URL")),
    productionUrl: httpUrl("PETSTORE_PRODUCTION_URL").pipe(Config.withDefault("https://petstore.example.com")),
    stagingUrl: httpUrl("PETSTORE_STAGING_URL").pipe(Config.withDefault("https://staging.petstore.example.com")),
    rateLimit: Config.all({
      perSecond: checked(
        "RATE_LIMIT_PER_SECOND",
        Schema.NumberFromString,
        rule("must be a positive number", (n) => n > 0)
      )
        .pipe(Config.withDefault(100)),
      burst: checked(
        "RATE_LIMIT_BURST",
        Schema.NumberFromString,
        rule("must be a positive integer", (n) => Number.isInteger(n) && n >= 1)
      ).pipe(Config.withDefault(200))
    }),
    authFailuresPerMinute: checked(
      "AUTH_FAILURES_PER_MINUTE",
      Schema.NumberFromString,
      rule("must be a positive integer", (n) => Number.isInteger(n) && n >= 1)
    ).pipe(Config.withDefault(20)),
    trustedProxies: checked(
      "TRUSTED_PROXIES",
      Schema.String,
      rule(
        "must be comma-separated IP addresses or CIDR ranges, such as 10.0.0.0/8, 192.0.2.7, fd00::/8",
        (value) => parseTrustedProxies(value).invalid.length === 0
      )
    ).pipe(
      Config.map((value): ReadonlyArray<IpRange> => parseTrustedProxies(value).ranges),
      Config.withDefault([] as ReadonlyArray<IpRange>)
    ),
    corsOrigins: checked(
      "CORS_ORIGINS",
      Schema.String,
      rule("must be a comma-separated list of http(s) origins", (list) => originsOf(list).every(isHttpUrl))
    ).pipe(Config.map(originsOf), Config.withDefault([] as ReadonlyArray<string>)),
    logLevel: checked(
      "LOG_LEVEL",
      Schema.String,
      rule(
        "must be one of all, fatal, error, warn, info, debug, trace, off",
        (value) => Object.hasOwn(logLevels, value.trim().toUpperCase())
      )
    ).pipe(
      Config.map((value) => logLevels[value.trim().toUpperCase()]!),
      Config.withDefault("Info" as LogLevel.LogLevel)
    ),
    workers: checked(
      "WORKERS",
      Schema.String,
      rule("must be auto or a whole number of processes from 1 to 256", (value) => {
        const n = workersOf(value)
        return Number.isInteger(n) && n >= 1 && n <= 256
      })
    ).pipe(Config.map(workersOf), Config.withDefault(1)),
    stopGrace: seconds(
      "STOP_GRACE_SECONDS",
      "must be a number of seconds from 0 to 3600",
      (n) => n >= 0 && n <= 3600,
      5
    ),
    drainTimeout: seconds(
      "DRAIN_TIMEOUT_SECONDS",
      "must be a number of seconds from 0 to 3600",
      (n) => n >= 0 && n <= 3600,
      10
    ),
    // Bun closes a connection idle for 10 s: an answer must come before that.
    requestTimeout: seconds(
      "REQUEST_TIMEOUT_SECONDS",
      "must be a number of seconds above 0 and below 10",
      (n) => n > 0 && n < 10,
      5
    ),
    databaseConnectTimeout: databaseSeconds("DATABASE_CONNECT_TIMEOUT_SECONDS", 3),
    databaseStatementTimeout: databaseSeconds("DATABASE_STATEMENT_TIMEOUT_SECONDS", 3),
    databaseStartTimeout: seconds(
      "DATABASE_START_TIMEOUT_SECONDS",
      "must be a number of seconds from 0 to 3600",
      (n) => n >= 0 && n <= 3600,
      30
    ),
    // Whole seconds: the kernel's keepalive idle time is set in seconds.
    databaseKeepAlive: seconds(
      "DATABASE_KEEPALIVE_SECONDS",
      "must be a whole number of seconds from 1 to 300",
      (n) => Number.isInteger(n) && n >= 1 && n <= 300,
      10
    )
  }).pipe(
    // A request waiting for a PostgreSQL connection gives up when the connect timeout ends, a
    // connection error logged and counted as the pool's: that has to come before its deadline, which
    // would say only that the database did not answer. SQLite opens none.
    Config.flatMap((config) =>
      !isPostgresUrl(config.databaseUrl) || Duration.isLessThan(config.databaseConnectTimeout, config.requestTimeout)
        ? Config.succeed(config)
        : invalidAt(
          "DATABASE_CONNECT_TIMEOUT_SECONDS",
          `must be below REQUEST_TIMEOUT_SECONDS (${Duration.toSeconds(config.requestTimeout)} s; it is ` +
            `${
              Duration.toSeconds(config.databaseConnectTimeout)
            } s), so that a request waiting for a database connection ` +
            "is answered database_unavailable before its deadline"
        )
    ),
    Config.map(({ productionUrl, publicBaseUrl, stagingUrl, ...config }) => {
      const self = Option.getOrElse(publicBaseUrl, () => `http://localhost:${config.port}`)
      return {
        ...config,
        publicBaseUrl: self,
        servers: serversFor(config.environment, self, { production: productionUrl, staging: stagingUrl })
      }
    })
  )

  static readonly layer = Layer.effect(AppConfig, AppConfig.config)

  /** Settings for tests and for composing the service in code. */
  static readonly make = (config: Partial<AppConfig["Service"]> = {}) => {
    const environment = config.environment ?? "staging"
    const publicBaseUrl = config.publicBaseUrl ?? "http://localhost:3000"
    return Layer.succeed(AppConfig, {
      port: 3000,
      host: "127.0.0.1",
      databaseUrl: defaultDatabaseUrl,
      environment,
      publicBaseUrl,
      servers: serversFor(environment, publicBaseUrl, {
        production: "https://petstore.example.com",
        staging: "https://staging.petstore.example.com"
      }),
      rateLimit: { perSecond: 100, burst: 200 },
      authFailuresPerMinute: 20,
      trustedProxies: [],
      corsOrigins: [],
      logLevel: "Info",
      workers: 1,
      stopGrace: Duration.seconds(5),
      drainTimeout: Duration.seconds(10),
      requestTimeout: Duration.seconds(5),
      databaseConnectTimeout: Duration.seconds(3),
      databaseStatementTimeout: Duration.seconds(3),
      databaseStartTimeout: Duration.seconds(30),
      databaseKeepAlive: Duration.seconds(10),
      ...config
    })
  }
}

/** Whether two listen addresses take connections to one address: the same, or either every address. */
const overlap = (a: string, b: string) => {
  const every = (host: string) => host === "0.0.0.0" || host === "::"
  return a.trim().toLowerCase() === b.trim().toLowerCase() || every(a.trim()) || every(b.trim())
}

/**
 * The API's and the metrics' listeners apart: one port on overlapping addresses is refused at
 * start naming both settings, where the second listener would fail with Bun's "Is port … in use?".
 */
export const listenersApart: Config.Config<void> = Config.all({
  port: portSetting,
  host: hostSetting,
  metrics: metricsListener
})
  .pipe(
    Config.flatMap(({ host, metrics, port }) =>
      Option.isSome(metrics) && metrics.value.port === port && overlap(metrics.value.host, host)
        ? invalidAt(
          "METRICS_PORT",
          `must differ from PORT where METRICS_HOST (${metrics.value.host}) and HOST (${host}) overlap; both are ${port}`
        )
        : Config.succeed(undefined)
    )
  )

/**
 * A configuration error in one line naming the variable and its rule:
 * `Invalid data at WORKERS: "must be auto or a whole number of processes from 1 to 256"`.
 */
export const describeConfigError = (error: Config.ConfigError): string => {
  const cause = error.cause
  if (!Schema.isSchemaError(cause)) return String(cause)
  const [first] = SchemaIssue.makeFormatterStandardSchemaV1()(cause.issue).issues
  if (first === undefined) return cause.message
  const path = (first.path ?? []).map((key) => String(typeof key === "object" ? key.key : key)).join(".")
  return path === "" ? first.message : `Invalid data at ${path}: ${JSON.stringify(first.message)}`
}

/** The SQLite file a `DATABASE_URL` names: a path, `sqlite:path` or `file:path`. */
export function sqliteFilename(databaseUrl: string): string {
  return databaseUrl.replace(/^(sqlite|file):(\/\/)?/, "")
}

/** Whether a `DATABASE_URL` names a PostgreSQL database rather than a SQLite file. */
export const isPostgresUrl = (databaseUrl: string): boolean => /^postgres(ql)?:\/\//i.test(databaseUrl)

/**
 * Whether a URL's userinfo holds a character that ends it before its last `@` (a password's
 * unencoded `/`, `?`, `#` or `@`): drivers then disagree on where the host begins, and one takes
 * part of the password for a host name and looks it up.
 */
const hasAmbiguousUserinfo = (value: string): boolean => {
  const rest = value.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
  const at = rest.lastIndexOf("@")
  return at !== -1 && /[/?#@]/.test(rest.slice(0, at))
}

/**
 * What makes a database location unusable as given, worded to follow its name (`DATABASE_URL:
 * …`), or undefined. The service, `keys` and `db` refuse alike, before anything is created or
 * connected to: a `postgres://` URL that is not one (the value is never quoted: it may hold a
 * password), and a SQLite file in a folder that does not exist (a mistyped path would otherwise
 * start on a new, empty store).
 */
export const databaseUrlProblem = (value: string): string | undefined => {
  if (isPostgresUrl(value)) {
    const invalid =
      "is not a valid postgres:// URL (a password's reserved characters, such as @ / ? #, must be percent-encoded)"
    if (hasAmbiguousUserinfo(value)) return invalid
    try {
      new URL(value)
    } catch {
      return invalid
    }
    return undefined
  }
  const folder = dirname(sqliteFilename(value))
  let found: ReturnType<typeof statSync>
  try {
    found = statSync(folder, { throwIfNoEntry: false })
  } catch (cause) {
    return `names a file in ${folder}, which cannot be reached (${
      cause instanceof Error ? cause.message : String(cause)
    })`
  }
  if (found === undefined) {
    return `names a file in ${folder}, a folder that does not exist: create the folder, or correct the path`
  }
  return found.isDirectory() ? undefined : `names a file in ${folder}, which is not a folder: correct the path`
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}
