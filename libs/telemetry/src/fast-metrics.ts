import type { Registry } from 'prom-client';

/*
 * Counters and histograms for the hot path. prom-client's labelled `inc`/`observe` validate and
 * hash the label set on every call (a few µs each, measured: docs/benchmarks.md); these keep plain
 * numbers per label tuple, bound once, and hand prom-client's registry the values only when it
 * is scraped (`get`, the interface the registry formats). Same text output, same names.
 */

type LabelSet = Record<string, string>;

interface MetricValue {
  value: number;
  labels: LabelSet;
  metricName?: string;
}

/**
 * What prom-client's registry reads of a metric when it formats a scrape: `name`, `help`, `type`,
 * `aggregator` and `get()` (the FastMetric members below). `Registry.registerMetric` is public but
 * typed for prom-client's own classes; this view of it takes any metric with `get()`. A method
 * parameter is compared bivariantly, so the registry is assignable to it without a cast; the
 * run-time check fails loudly if a prom-client release drops the method.
 */
interface ScrapeRegistry {
  registerMetric(metric: { get(): Promise<unknown> }): void;
}

function registerScraped(registry: ScrapeRegistry, metric: FastMetric<unknown>): void {
  if (typeof registry.registerMetric !== 'function') {
    throw new Error(`telemetry: ${metric.name}: the prom-client registry has no registerMetric`);
  }
  registry.registerMetric(metric);
}

/** The registry's view of a metric: what `Registry.getMetricsAsString` reads. */
abstract class FastMetric<C> {
  private readonly children = new Map<string, { labels: LabelSet; child: C }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registerScraped(registry, this);
  }

  /** The child of one label tuple (values in `labelNames` order), created once. */
  child(values: readonly string[]): C {
    const key = values.join('\u0000');
    let entry = this.children.get(key);
    if (!entry) {
      const labels: LabelSet = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i] ?? ''));
      entry = { labels, child: this.create() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: string }> {
    const values: MetricValue[] = [];
    for (const { labels, child } of this.children.values()) {
      this.values(labels, child, values);
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: 'sum' });
  }

  /** Label-less metrics export a zero series before their first observation. */
  protected init(): void {
    if (this.labelNames.length === 0) {
      this.child([]);
    }
  }

  protected abstract create(): C;
  protected abstract values(labels: LabelSet, child: C, out: MetricValue[]): void;
}

export class CounterChild {
  value = 0;

  inc(n = 1): void {
    this.value += n;
  }
}

export class FastCounter extends FastMetric<CounterChild> {
  private solo?: CounterChild;

  constructor(name: string, help: string, labelNames: readonly string[], registry: Registry) {
    super(name, help, 'counter', labelNames, registry);
    this.init();
  }

  /** A counter without labels. */
  inc(n = 1): void {
    (this.solo ??= this.child([])).inc(n);
  }

  protected create(): CounterChild {
    return new CounterChild();
  }

  protected values(labels: LabelSet, child: CounterChild, out: MetricValue[]): void {
    out.push({ value: child.value, labels });
  }
}

export class HistogramChild {
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]) {
      i++;
    }
    this.counts[i]++;
    this.sum += v;
    this.count++;
  }
}

export class FastHistogram extends FastMetric<HistogramChild> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly buckets: readonly number[],
    registry: Registry,
  ) {
    super(name, help, 'histogram', labelNames, registry);
    this.init();
  }

  private solo?: HistogramChild;

  /** A histogram without labels. */
  observe(v: number): void {
    (this.solo ??= this.child([])).observe(v);
  }

  protected create(): HistogramChild {
    return new HistogramChild(this.buckets);
  }

  protected values(labels: LabelSet, child: HistogramChild, out: MetricValue[]): void {
    let cumulative = 0;
    this.buckets.forEach((le, i) => {
      cumulative += child.counts[i];
      out.push({ value: cumulative, labels: { le: String(le), ...labels }, metricName: `${this.name}_bucket` });
    });
    out.push({ value: child.count, labels: { le: '+Inf', ...labels }, metricName: `${this.name}_bucket` });
    out.push({ value: child.sum, labels, metricName: `${this.name}_sum` });
    out.push({ value: child.count, labels, metricName: `${this.name}_count` });
  }
}
