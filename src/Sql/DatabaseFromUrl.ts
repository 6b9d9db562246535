import { Layer } from "effect"
import type { SqlClient } from "effect/sql"
import { AppConfig, isPostgresUrl } from "../Config/AppConfig.js"
import { PostgresConnection } from "./PostgresConnection.js"
import { SqliteConnection } from "./SqliteConnection.js"

/** The database `DATABASE_URL` names, SQLite file or PostgreSQL, migrated, as a `SqlClient`. */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.unwrap(
  AppConfig.useSync(({ databaseUrl }) => isPostgresUrl(databaseUrl) ? PostgresConnection : SqliteConnection)
)
