import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // vitest 5's default forks pool fails under `bun --bun` (child.channel?.unref is not a function).
    pool: "threads",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The run's folder, where what the tests share (the PostgreSQL cluster, the build, the image)
    // is made once when a test first needs it, and removed at the run's end.
    globalSetup: ["test/support/runSetup.ts"]
  }
})
