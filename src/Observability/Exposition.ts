import { Context, Effect, Layer, Metric, MetricState, Option, type Scope } from "effect"

/** One labelled series of a metric, in a form that crosses processes as JSON and adds up. */
export type Series =
  | {
    readonly kind: "counter" | "gauge"
    readonly name: string
    readonly help: string
    readonly labels: ReadonlyArray<readonly [string, string]>
    readonly value: number
  }
  | {
    readonly kind: "histogram"
    readonly name: string
    readonly help: string
    readonly labels: ReadonlyArray<readonly [string, string]>
    /** Upper bounds (the last is +Inf) with the cumulative count of observations at or below each. */
    readonly buckets: ReadonlyArray<readonly [number, number]>
    readonly sum: number
    readonly count: number
  }

const validName = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/

/**
 * Every metric of this process's Effect registry with a name Prometheus accepts, but Effect's own
 * fiber counts (kept for the runtime's start-up fibers only, they would mislead).
 */
export const registrySeries = (): Array<Series> => {
  const series: Array<Series> = []
  for (const { metricKey, metricState } of Metric.unsafeSnapshot()) {
    if (!validName.test(metricKey.name) || metricKey.name.startsWith("effect_")) continue
    const base = {
      name: metricKey.name,
      help: Option.getOrElse(metricKey.description, () => metricKey.name),
      labels: metricKey.tags.map((tag) => [tag.key, tag.value] as const)
    }
    if (MetricState.isCounterState(metricState)) {
      series.push({ ...base, kind: "counter", value: Number(metricState.count) })
    } else if (MetricState.isGaugeState(metricState)) {
      series.push({ ...base, kind: "gauge", value: Number(metricState.value) })
    } else if (MetricState.isHistogramState(metricState)) {
      series.push({
        ...base,
        kind: "histogram",
        buckets: Array.from(metricState.buckets, ([bound, count]) => [bound, count] as const),
        sum: metricState.sum,
        count: metricState.count
      })
    }
  }
  return series
}

/**
 * Series read at each scrape from the layers that added them (a pool's connections, the trace
 * export queue), beside Effect's own metrics: one per process, provided where its metrics are
 * served.
 */
export class MetricsCollectors extends Context.Tag("petstore/MetricsCollectors")<MetricsCollectors, {
  readonly add: (collect: () => ReadonlyArray<Series>) => () => void
  /** The series of every collector added, read now. */
  readonly series: () => Array<Series>
}>() {
  static readonly layer = Layer.sync(MetricsCollectors, () => {
    // Bounded by the layers alive: each adds one and removes it when released.
    const collectors = new Set<() => ReadonlyArray<Series>>()
    return {
      add: (collect) => {
        collectors.add(collect)
        return () => void collectors.delete(collect)
      },
      series: () => [...collectors].flatMap((collect) => collect())
    }
  })
}

/**
 * Adds series read at each scrape for as long as the scope lasts; nothing where no metrics are
 * served (a command-line tool, a test of a store alone).
 */
export const addCollector = (collect: () => ReadonlyArray<Series>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.serviceOption(MetricsCollectors), (collectors) =>
    Option.isNone(collectors)
      ? Effect.void
      : Effect.acquireRelease(Effect.sync(() => collectors.value.add(collect)), (remove) => Effect.sync(remove)))

const seriesKey = (series: Series) => series.name + "\u0000" + series.labels.map(([k, v]) => `${k}=${v}`).join("\u0000")

/** Series of several processes added up: counters, gauges and histogram buckets by name and labels. */
export const addUp = (groups: ReadonlyArray<ReadonlyArray<Series>>): Array<Series> => {
  const total = new Map<string, Series>()
  for (const group of groups) {
    for (const series of group) {
      const key = seriesKey(series)
      const earlier = total.get(key)
      if (earlier === undefined) {
        total.set(key, series)
      } else if (earlier.kind === "histogram" && series.kind === "histogram") {
        total.set(key, {
          ...earlier,
          buckets: earlier.buckets.map(([bound, count], i) => [bound, count + (series.buckets[i]?.[1] ?? 0)] as const),
          sum: earlier.sum + series.sum,
          count: earlier.count + series.count
        })
      } else if (earlier.kind !== "histogram" && series.kind !== "histogram") {
        total.set(key, { ...earlier, value: earlier.value + series.value })
      }
    }
  }
  return [...total.values()]
}

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")
const escapeHelp = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const labelText = (labels: ReadonlyArray<readonly [string, string]>) =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`

const numberText = (value: number) =>
  value === Infinity ? "+Inf" : value === -Infinity ? "-Inf" : Number.isNaN(value) ? "NaN" : String(value)

/** The Prometheus text exposition format (0.0.4) of these series, each metric's series together. */
export const render = (series: ReadonlyArray<Series>): string => {
  const families = new Map<string, Array<Series>>()
  for (const one of series) {
    const family = families.get(one.name)
    if (family === undefined) families.set(one.name, [one])
    else family.push(one)
  }
  const lines: Array<string> = []
  for (const [name, members] of families) {
    lines.push(`# HELP ${name} ${escapeHelp(members[0]!.help)}`, `# TYPE ${name} ${members[0]!.kind}`)
    for (const one of members) {
      if (one.kind !== "histogram") {
        lines.push(`${name}${labelText(one.labels)} ${numberText(one.value)}`)
        continue
      }
      for (const [bound, count] of one.buckets) {
        lines.push(`${name}_bucket${labelText([...one.labels, ["le", numberText(bound)]])} ${count}`)
      }
      if (one.buckets.at(-1)?.[0] !== Infinity) {
        lines.push(`${name}_bucket${labelText([...one.labels, ["le", "+Inf"]])} ${one.count}`)
      }
      lines.push(`${name}_sum${labelText(one.labels)} ${numberText(one.sum)}`)
      lines.push(`${name}_count${labelText(one.labels)} ${one.count}`)
    }
  }
  return lines.join("\n") + "\n"
}

export const contentType = "text/plain; version=0.0.4; charset=utf-8"
