import { Config, Context, Duration, Layer, LogLevel, Option } from "effect"
import { availableParallelism } from "node:os"
import { parseTrustedProxies } from "../Request/ClientAddress.js"
import type { IpRange } from "../Request/IpAddress.js"

export type Environment = "production" | "staging"

/** An entry of the OpenAPI `servers` list. */
export interface Server {
  readonly url: string
  readonly description: string
}

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

const httpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({ message: "must be an absolute http(s) URL", validation: isHttpUrl }),
    Config.map((url) => url.replace(/\/+$/, ""))
  )

/** A database timeout: under a request's deadline, which Bun's 10 s idle timeout bounds. */
const seconds = (name: string, defaultSeconds: number) =>
  Config.number(name).pipe(
    Config.validate({ message: "must be a number of seconds above 0 and below 10", validation: (n) => n > 0 && n < 10 }),
    Config.withDefault(defaultSeconds),
    Config.map(Duration.seconds)
  )

/** The service's settings, read from the environment and checked once at start. */
export class AppConfig extends Context.Tag("petstore/AppConfig")<
  AppConfig,
  {
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
  }
>() {
  static readonly config = Config.all({
    port: Config.integer("PORT").pipe(
      Config.validate({ message: "must be a port number from 1 to 65535", validation: (p) => p >= 1 && p <= 65535 }),
      Config.withDefault(3000)
    ),
    host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
    // Named by `nested` after its checks, so that every check's message names DATABASE_URL.
    databaseUrl: Config.string().pipe(
      Config.validate({
        message:
          "must be a postgres:// URL, or a SQLite file path, sqlite:path or file:path (not :memory:: the migrations and the service share the file)",
        validation: (url) =>
          url.trim().length > 0 && !url.includes(":memory:") &&
          !/^(?!sqlite:|file:|postgres:\/\/|postgresql:\/\/)[a-z][a-z0-9+.-]*:\/\//i.test(url)
      }),
      Config.validate({
        message: "names no SQLite file: the path after sqlite: or file: is empty",
        validation: (url) => sqliteFilename(url).trim().length > 0
      }),
      Config.nested("DATABASE_URL"),
      Config.withDefault("data/petstore.db")
    ),
    environment: Config.literal("production", "staging")("PETSTORE_ENV").pipe(Config.withDefault("staging")),
    publicBaseUrl: Config.option(httpUrl("PUBLIC_BASE_URL")),
    productionUrl: httpUrl("PETSTORE_PRODUCTION_URL").pipe(Config.withDefault("https://petstore.example.com")),
    stagingUrl: httpUrl("PETSTORE_STAGING_URL").pipe(Config.withDefault("https://staging.petstore.example.com")),
    rateLimit: Config.all({
      perSecond: Config.number("RATE_LIMIT_PER_SECOND").pipe(
        Config.validate({ message: "must be a positive number", validation: (n) => n > 0 }),
        Config.withDefault(100)
      ),
      burst: Config.integer("RATE_LIMIT_BURST").pipe(
        Config.validate({ message: "must be a positive integer", validation: (n) => n >= 1 }),
        Config.withDefault(200)
      )
    }),
    authFailuresPerMinute: Config.integer("AUTH_FAILURES_PER_MINUTE").pipe(
      Config.validate({ message: "must be a positive integer", validation: (n) => n >= 1 }),
      Config.withDefault(20)
    ),
    // Named by `nested` after their checks, so that a bad value's message names the variable.
    trustedProxies: Config.string().pipe(
      Config.validate({
        message: "must be comma-separated IP addresses or CIDR ranges, such as 10.0.0.0/8, 192.0.2.7, fd00::/8",
        validation: (value) => parseTrustedProxies(value).invalid.length === 0
      }),
      Config.map((value) => parseTrustedProxies(value).ranges),
      Config.nested("TRUSTED_PROXIES"),
      Config.withDefault([])
    ),
    corsOrigins: Config.string().pipe(
      Config.map((list) => list.split(",").map((origin) => origin.trim().replace(/\/+$/, "")).filter((o) => o !== "")),
      Config.validate({ message: "must be a comma-separated list of http(s) origins", validation: (list) => list.every(isHttpUrl) }),
      Config.nested("CORS_ORIGINS"),
      Config.withDefault([])
    ),
    logLevel: Config.logLevel("LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info)),
    workers: Config.string().pipe(
      Config.map((value) => value.trim() === "auto" ? availableParallelism() : Number(value)),
      Config.validate({
        message: "must be auto or a whole number of processes from 1 to 256",
        validation: (n) => Number.isInteger(n) && n >= 1 && n <= 256
      }),
      Config.nested("WORKERS"),
      Config.withDefault(1)
    ),
    drainTimeout: Config.number("DRAIN_TIMEOUT_SECONDS").pipe(
      Config.validate({ message: "must be a number of seconds from 0 to 3600", validation: (n) => n >= 0 && n <= 3600 }),
      Config.withDefault(10),
      Config.map(Duration.seconds)
    ),
    // Bun closes a connection idle for 10 s: an answer must come before that.
    requestTimeout: Config.number("REQUEST_TIMEOUT_SECONDS").pipe(
      Config.validate({ message: "must be a number of seconds above 0 and below 10", validation: (n) => n > 0 && n < 10 }),
      Config.withDefault(5),
      Config.map(Duration.seconds)
    ),
    databaseConnectTimeout: seconds("DATABASE_CONNECT_TIMEOUT_SECONDS", 3),
    databaseStatementTimeout: seconds("DATABASE_STATEMENT_TIMEOUT_SECONDS", 3),
    databaseStartTimeout: Config.number("DATABASE_START_TIMEOUT_SECONDS").pipe(
      Config.validate({ message: "must be a number of seconds from 0 to 3600", validation: (n) => n >= 0 && n <= 3600 }),
      Config.withDefault(30),
      Config.map(Duration.seconds)
    )
  }).pipe(
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
  static readonly make = (config: Partial<AppConfig["Type"]> = {}) => {
    const environment = config.environment ?? "staging"
    const publicBaseUrl = config.publicBaseUrl ?? "http://localhost:3000"
    return Layer.succeed(AppConfig, {
      port: 3000,
      host: "127.0.0.1",
      databaseUrl: "data/petstore.db",
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
      logLevel: LogLevel.Info,
      workers: 1,
      drainTimeout: Duration.seconds(10),
      requestTimeout: Duration.seconds(5),
      databaseConnectTimeout: Duration.seconds(3),
      databaseStatementTimeout: Duration.seconds(3),
      databaseStartTimeout: Duration.seconds(30),
      ...config
    })
  }
}

/** The SQLite file a `DATABASE_URL` names: a path, `sqlite:path` or `file:path`. */
export function sqliteFilename(databaseUrl: string): string {
  return databaseUrl.replace(/^(sqlite|file):(\/\/)?/, "")
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}
