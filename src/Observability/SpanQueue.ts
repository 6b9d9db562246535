import type { Series } from "./Exposition.js"

export interface BatchSettings {
  /** Spans waiting at most; a span ended while the queue is full is dropped and counted. */
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  /** How long a span may wait for a batch to fill. */
  readonly scheduleDelayMillis: number
  /** How long one export may take before its spans are given up. */
  readonly exportTimeoutMillis: number
}

const minBackoffMillis = 1000
const maxBackoffMillis = 30_000

/** An export's outcome: undefined when the receiving end took the spans, else a short error type. */
export type ExportOutcome = string | undefined

/**
 * Ended spans queued and exported in batches, one export at a time, as OpenTelemetry's batching
 * span processor does, but bounded everywhere: a span is added in constant time whatever the
 * collector does; while it is slow or away the queue fills, and every span beyond it is dropped
 * and counted, so memory stays at the queue's size and no request waits. After a failed export
 * the next waits 1 s, then twice as long each time up to 30 s, until one succeeds.
 */
export const makeSpanQueue = <S>(settings: BatchSettings, send: (batch: Array<S>) => Promise<ExportOutcome>) => {
  let queue: Array<S> = []
  let exporting = false
  let timer: ReturnType<typeof setTimeout> | undefined
  let exportDue = false
  // After a failed export the next waits, doubling up to a bound: a collector away costs no CPU.
  let backoffMillis = 0
  let pausedUntil = 0
  let dropped = 0
  let handed = 0
  let exported = 0
  const failed = new Map<string, number>()

  const withTimeout = (batch: Array<S>): Promise<ExportOutcome> =>
    new Promise((resolve) => {
      const deadline = setTimeout(() => resolve("timeout"), settings.exportTimeoutMillis)
      send(batch).then(
        (outcome) => resolve(outcome),
        () => resolve("_OTHER")
      ).finally(() => clearTimeout(deadline))
    })

  const takeBatch = () => {
    if (queue.length <= settings.maxExportBatchSize) {
      const batch = queue
      queue = []
      return batch
    }
    return queue.splice(0, settings.maxExportBatchSize)
  }

  /** Exports batches while the queue holds a full one; answers when the export in flight, if any, ends. */
  const exportNext = async (): Promise<void> => {
    if (exporting || queue.length === 0) return
    if (timer !== undefined) {
      clearTimeout(timer)
      timer = undefined
    }
    if (Date.now() < pausedUntil) return schedule(pausedUntil - Date.now())
    exporting = true
    const batch = takeBatch()
    handed += batch.length
    const outcome = await withTimeout(batch)
    if (outcome === undefined) {
      exported += batch.length
      backoffMillis = 0
    } else {
      failed.set(outcome, (failed.get(outcome) ?? 0) + batch.length)
      backoffMillis = Math.min(maxBackoffMillis, Math.max(minBackoffMillis, backoffMillis * 2))
      pausedUntil = Date.now() + backoffMillis
    }
    exporting = false
    if (queue.length >= settings.maxExportBatchSize) return exportNext()
    if (queue.length > 0) schedule()
  }

  const schedule = (delay = Math.max(settings.scheduleDelayMillis, pausedUntil - Date.now())) => {
    if (timer !== undefined || exporting) return
    timer = setTimeout(() => {
      timer = undefined
      void exportNext()
    }, delay)
    // A batch not yet due keeps no process alive: the layer's release flushes it.
    timer.unref?.()
  }

  return {
    /** Queues the span `make` answers, or, when the queue is full, counts it dropped without making it. */
    offer: (make: () => S): void => {
      if (queue.length >= settings.maxQueueSize) {
        dropped++
        return
      }
      queue.push(make())
      if (queue.length >= settings.maxExportBatchSize) {
        // Encoded and sent after the request's own work, never inside it.
        if (!exporting && !exportDue && Date.now() >= pausedUntil) {
          exportDue = true
          setImmediate(() => {
            exportDue = false
            void exportNext()
          })
        }
      } else {
        schedule()
      }
    },

    /** Exports every span queued now, batch after batch, until one export fails: at a stop, whatever the backoff. */
    flush: async (): Promise<void> => {
      while (exporting) await new Promise((resolve) => setTimeout(resolve, 5))
      pausedUntil = 0
      while (queue.length > 0 && Date.now() >= pausedUntil) await exportNext()
    },

    /** The queue's size and capacity, and the spans handed on, dropped, exported and lost, as OpenTelemetry's SDK metrics name them. */
    series: (): Array<Series> => {
      const processor = ["otel_component_type", "batching_span_processor"] as const
      const exporter = ["otel_component_type", "otlp_http_json_span_exporter"] as const
      const processed = "Ended spans the queue handed to the exporter, or dropped because it was full (error_type=\"queue_full\")"
      const sent = "Spans sent to the OTLP receiving end: taken, or lost with the export's error (error_type)"
      return [
        gauge("otel_sdk_processor_span_queue_size", "Ended spans waiting in the queue to be exported", [processor], queue.length),
        gauge(
          "otel_sdk_processor_span_queue_capacity",
          "Spans the queue holds at most (OTEL_BSP_MAX_QUEUE_SIZE); beyond it they are dropped",
          [processor],
          settings.maxQueueSize
        ),
        counter("otel_sdk_processor_span_processed_total", processed, [processor], handed),
        counter("otel_sdk_processor_span_processed_total", processed, [processor, ["error_type", "queue_full"]], dropped),
        counter("otel_sdk_exporter_span_exported_total", sent, [exporter], exported),
        ...Array.from(failed, ([errorType, count]) =>
          counter("otel_sdk_exporter_span_exported_total", sent, [exporter, ["error_type", errorType]], count))
      ]
    }
  }
}

type Labels = ReadonlyArray<readonly [string, string]>
const gauge = (name: string, help: string, labels: Labels, value: number): Series => ({ kind: "gauge", name, help, labels, value })
const counter = (name: string, help: string, labels: Labels, value: number): Series => ({ kind: "counter", name, help, labels, value })
