import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // vitest 5's default forks pool fails under `bun --bun` (child.channel?.unref is not a function).
    pool: "threads",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // One throwaway PostgreSQL cluster for the run (Debian's package, installed when missing), and
    // the folder where the build and image the tests share are made once (test/support/Build.ts).
    globalSetup: ["test/support/postgresSetup.ts", "test/support/buildSetup.ts"]
  }
})
