/**
 * An OTLP/HTTP receiving end for the benchmark: reads each export, counts it and drops it, so
 * tracing is measured exporting for real without a collector. Prints its counts when stopped.
 *
 * Usage: bun scripts/bench/otlp-sink.ts PORT
 */
const port = Number(process.argv[2])
let received = 0
let bytes = 0
const server = Bun.serve({
  port,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    bytes += (await request.arrayBuffer()).byteLength
    received++
    return Response.json({})
  }
})
process.on("SIGTERM", () => {
  console.log(JSON.stringify({ exports: received, bytes }))
  server.stop(true)
  process.exit(0)
})
