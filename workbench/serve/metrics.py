"""Prometheus metrics of a server (``GET /metrics``), with ``prometheus-client``.

Counters and histograms accumulate over the server's life (Prometheus computes rates and
quantiles from them); the ``*_window`` gauges carry the :class:`PerformanceMonitor`'s sliding
p50 / p95 / p99 as a ``quantile`` label, like a Prometheus summary.
"""

from __future__ import annotations

from typing import Any

from .monitor import QUANTILES, PerformanceMonitor, rss_bytes

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServerMetrics:
    """The server's registry: requests, tokens, latencies, queue, batch and memory."""

    def __init__(self, monitor: PerformanceMonitor, gauges: Any = None):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.monitor = monitor
        self.gauges = gauges  # () -> {"queue_depth", "active", "slots"}, read at scrape time
        self.registry = r = CollectorRegistry()
        self.requests = Counter("workbench_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)  # fmt: skip
        self.prompt_tokens = Counter("workbench_prompt_tokens", "Prompt tokens processed",
                                     registry=r)  # fmt: skip
        self.completion_tokens = Counter("workbench_completion_tokens", "Tokens generated",
                                         registry=r)  # fmt: skip
        self.latency = Histogram("workbench_request_latency_seconds", "Request latency",
                                 buckets=_LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.ttft = Histogram("workbench_time_to_first_token_seconds", "Time to first token",
                              buckets=_LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.batch = Histogram("workbench_batch_size", "Sequences per forward step",
                               buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)  # fmt: skip
        r.register(_Live(self))

    def finished(self, latency: float, ttft: float | None, prompt: int, completion: int) -> None:
        """One request served: into the histograms, the counters and the monitor."""
        self.latency.observe(latency)
        if ttft is not None:
            self.ttft.observe(ttft)
        self.prompt_tokens.inc(prompt)
        self.completion_tokens.inc(completion)
        self.monitor.record_request(latency, ttft, completion)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Live:
    """Scrape-time gauges: queue depth, active slots, memory and the monitor's window."""

    def __init__(self, metrics: ServerMetrics):
        self.m = metrics

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        if self.m.gauges is not None:
            g = self.m.gauges()
            yield GaugeMetricFamily("workbench_queue_depth", "Requests waiting for a slot",
                                    value=g["queue_depth"])  # fmt: skip
            yield GaugeMetricFamily("workbench_active_sequences", "Sequences being decoded",
                                    value=g["active"])  # fmt: skip
            yield GaugeMetricFamily("workbench_slots", "Sequences decoded together at most",
                                    value=g["slots"])  # fmt: skip
        yield GaugeMetricFamily("workbench_memory_rss_bytes", "Resident memory of the process",
                                value=rss_bytes())  # fmt: skip
        for name, help_ in (("latency", "Request latency (s)"), ("ttft", "Time to first token (s)"),
                            ("tokens_per_s", "Tokens per second per request")):  # fmt: skip
            fam = GaugeMetricFamily(f"workbench_{name}_window",
                                    f"{help_} over the monitor's sliding window",
                                    labels=["quantile"])  # fmt: skip
            stats = self.m.monitor.stats(name)
            if stats["count"]:
                for q in QUANTILES:
                    fam.add_metric([f"{q / 100:g}"], stats[f"p{q:g}"])
            yield fam
