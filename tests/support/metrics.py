"""Read the proxy's /metrics the way Prometheus does."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Samples:
    def __init__(self, text: str) -> None:
        self.values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.values[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def get(self, name: str, **labels: str) -> float:
        """A sample's value; 0 when the series does not exist (yet)."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def names(self) -> set[str]:
        return {name for name, _ in self.values}


def scrape(base_url: str) -> Samples:
    response = httpx.get(f"{base_url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Samples(response.text)
