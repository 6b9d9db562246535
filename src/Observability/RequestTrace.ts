import { Context, Effect, type Exit } from "effect"

/** A span's parent: a span of the trace, or the caller's (`traceparent`). */
export interface ParentSpan {
  readonly traceId: string
  readonly spanId: string
}

/** A span of a sampled trace, as its children and the request observer see it. */
export interface TraceSpan extends ParentSpan {
  readonly name: string
  /** False for a span the export could not hold: made by no one, exported nowhere. */
  readonly sampled: boolean
  attribute(key: string, value: unknown): void
}

export type SpanKind = "server" | "client" | "internal"

/** Where a sampled trace's spans are made and exported (`Tracing.ts`). */
export interface SpanRecorder {
  /** A new span of a sampled trace, started at `startTime` (`performance.now()`): the child of `parent`, or the trace's root. */
  readonly start: (name: string, kind: SpanKind, parent: ParentSpan | undefined, startTime: number) => TraceSpan
  /** Ends a span `start` made, for export. */
  readonly end: (span: TraceSpan, endTime: number, exit: Exit.Exit<unknown, unknown>) => void
}

/** The recorder of request traces, when traces are exported (`TracingLive`); none otherwise. */
export const SpanRecorder = Context.Reference<SpanRecorder | undefined>("petstore/SpanRecorder", {
  defaultValue: () => undefined
})

/** A span of a request's trace, open until `RequestTrace.end`. */
export interface OpenSpan {
  readonly span: TraceSpan
}

/**
 * A sampled request's trace: its server span, and the spans of its work, made and ended by plain
 * calls as the work starts and ends; a request's calls run one after another, so each is the child
 * of the innermost one open.
 *
 * Not Effect's spans (`Effect.withSpan` under a tracer enabled for the sampled request, wrapped to
 * drop spans outside a sampled trace): a sampled request runs through the fiber runtime as every
 * other does, and Effect's tracing stays off. Against that design, each loaded at once with 1%
 * sampled (`OTEL_TRACES_SAMPLER_ARG=0.01 … npm run bench -- --ab 59c5e4e 04d70d8 --only sqlite
 * --at-once --fresh`, 27 November 2026): get by id 1.006–1.039×, the list of 20 1.017×, create
 * 0.990×, the 401 1.036×, in 110 fewer lines.
 */
export class RequestTrace {
  private readonly open: Array<OpenSpan> = []

  constructor(readonly server: TraceSpan, private readonly recorder: SpanRecorder) {}

  /**
   * A span for work starting now, the child of the innermost span open; `end` ends it. Its own
   * handle: a span the export could not hold is one shared value, which may be open twice.
   */
  child(name: string, kind: SpanKind): OpenSpan {
    const open = { span: this.recorder.start(name, kind, this.open.at(-1)?.span ?? this.server, performance.now()) }
    this.open.push(open)
    return open
  }

  /** `effect` in a span of this trace starting now, ended with its exit, or with what `exitOf` makes of it. */
  around<A, E, R>(
    effect: Effect.Effect<A, E, R>,
    name: string,
    attributes: Readonly<Record<string, unknown>>,
    exitOf: (exit: Exit.Exit<A, E>) => Exit.Exit<unknown, unknown> = (exit) => exit
  ): Effect.Effect<A, E, R> {
    return Effect.suspend(() => {
      const open = this.child(name, "internal")
      for (const key in attributes) open.span.attribute(key, attributes[key])
      return Effect.onExit(effect, (exit) => Effect.sync(() => this.end(open, exitOf(exit))))
    })
  }

  /** Ends a span `child` made, and any made inside it left open (a statement its caller left running); once. */
  end(open: OpenSpan, exit: Exit.Exit<unknown, unknown>): void {
    const at = this.open.lastIndexOf(open)
    if (at !== -1) this.endFrom(at, exit, performance.now())
  }

  /** Ends the open spans from the `at`th, innermost first. */
  private endFrom(at: number, exit: Exit.Exit<unknown, unknown>, endTime: number): void {
    for (const inner of this.open.splice(at).reverse()) this.recorder.end(inner.span, endTime, exit)
  }

  /** A request's trace, its server span started now: the caller's span its parent, if any. */
  static start(recorder: SpanRecorder, name: string, caller: ParentSpan | undefined): RequestTrace {
    return new RequestTrace(recorder.start(name, "server", caller, performance.now()), recorder)
  }

  /**
   * Ends the server span as the request is answered, and any still open below it (its fiber
   * interrupted before its end): the export counts every span it made until it ends.
   */
  answered(exit: Exit.Exit<unknown, unknown>): void {
    const endTime = performance.now()
    this.endFrom(0, exit, endTime)
    this.recorder.end(this.server, endTime, exit)
  }
}
