"""The console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) loads every page against a live broker whose
state confluent-kafka and kafka-python made, checks what each shows, creates and deletes
a topic, sets a topic config, browses records in each view and resets a group's
offsets — and confirms each change with a Kafka client. One browser session for all.

Each page's screenshot is saved under the test's temporary directory
(``<pytest basetemp>/console-screenshots*/``), or under ``$SLUICE_SCREENSHOT_DIR`` when
set; the test prints where.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer

import sluice
from support.console import console_state

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"console.port": 0, "offsets.topic.num.partitions": 2}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip("chromium and chromium-driver are not installed (scripts/run-tests.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1000"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("SLUICE_SCREENSHOT_DIR")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return Path(chosen)
    return tmp_path_factory.mktemp("console-screenshots")


def test_every_page_in_a_browser(
    broker: sluice.EmbeddedBroker, browser: Any, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    assert broker.broker is not None and broker.broker.console is not None
    base = f"http://127.0.0.1:{broker.broker.console.port}/"
    bootstrap = broker.bootstrap_servers
    wait = WebDriverWait(browser, WAIT_S)

    def text_in(element_id: str, text: str) -> None:
        wait.until(ec.text_to_be_present_in_element((By.ID, element_id), text))

    def shot(name: str) -> None:
        browser.save_screenshot(str(screenshots / f"{name}.png"))

    def go(fragment: str) -> None:
        browser.get(base + fragment)

    with console_state(bootstrap):
        # Overview: the cluster as DescribeCluster gives it
        go("#/")
        text_in("cluster-id", broker.broker.cluster_id)
        assert browser.find_element(By.ID, "controller-id").text == "0"
        assert browser.find_element(By.ID, "version").text == f"Sluice {sluice.__version__}"
        text_in("brokers", str(broker.port))
        text_in("whoami", "no login")
        shot("overview")

        # Topics: the list, then a topic created by the form
        go("#/topics")
        text_in("topics-table", "orders")
        browser.find_element(By.ID, "new-topic-name").send_keys("from-browser")
        partitions = browser.find_element(By.ID, "new-topic-partitions")
        partitions.clear()
        partitions.send_keys("2")
        browser.find_element(By.ID, "create-topic").click()
        text_in("topics-table", "from-browser")
        text_in("create-topic-message", "Created from-browser")
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert len(metadata.topics["from-browser"].partitions) == 2
        python_view = KafkaConsumer(bootstrap_servers=bootstrap)
        assert python_view.partitions_for_topic("from-browser") == {0, 1}
        python_view.close()
        shot("topics")

        # A topic's partitions and configs; a config set through the form
        browser.find_element(By.LINK_TEXT, "orders").click()
        text_in("partitions-table", "browse records")
        rows = browser.find_elements(By.CSS_SELECTOR, "#partitions-table tbody tr")
        assert [r.find_elements(By.TAG_NAME, "td")[5].text for r in rows] == ["10"] * 3
        browser.find_element(By.ID, "config-name").send_keys("retention.ms")
        browser.find_element(By.ID, "config-value").send_keys("3600000")
        browser.find_element(By.ID, "set-config").click()
        text_in("configs-table", "DYNAMIC_TOPIC_CONFIG")
        row = browser.find_element(
            By.XPATH, "//table[@id='configs-table']//tr[td[1]='retention.ms']"
        )
        assert row.find_elements(By.TAG_NAME, "td")[1].text == "3600000"
        shot("topic")

        # Records of partition 1, newest first, in each view
        rows = browser.find_elements(By.CSS_SELECTOR, "#partitions-table tbody tr")  # redrawn
        rows[1].find_element(By.LINK_TEXT, "browse records").click()
        text_in("records-table", '{"n": 28}')
        text_in("record-range", "Offsets 0 to 10")
        cells = browser.find_elements(By.CSS_SELECTOR, "#records-table tbody tr td")
        assert (cells[0].text, cells[2].text, cells[3].text) == ("9", "k28", '{"n": 28}')
        assert "source: test" in cells[4].text
        shot("records-utf8")
        Select(browser.find_element(By.ID, "record-view")).select_by_value("json")
        text_in("records-table", '{\n  "n": 28\n}')
        Select(browser.find_element(By.ID, "record-view")).select_by_value("hex")
        text_in("records-table", "00000000  7b 22 6e 22 3a 20 32 38 7d")
        shot("records-hex")

        # Groups: lag, then a reset of the empty group to the end
        go("#/groups")
        text_in("groups-table", "billing")
        text_in("groups-table", "Stable")
        browser.find_element(By.LINK_TEXT, "billing").click()
        text_in("group-lag", "18")
        Select(browser.find_element(By.ID, "reset-to")).select_by_value("latest")
        browser.find_element(By.ID, "reset-offsets").click()
        text_in("reset-result", "Reset 3 partitions to latest")
        text_in("group-lag", "0")
        check = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "billing"})
        try:
            tps = [ConfluentTopicPartition("orders", p) for p in range(3)]
            assert [c.offset for c in check.committed(tps, 30)] == [10, 10, 10]
        finally:
            check.close()
        shot("group")
        browser.find_element(By.LINK_TEXT, "Consumer groups").click()
        text_in("groups-table", "live")
        browser.find_element(By.LINK_TEXT, "live").click()
        text_in("members-table", "events-0")
        text_in("group-state", "Stable")
        browser.find_element(By.ID, "reset-offsets").click()
        text_in("reset-result", "stop its consumers first")

        # Metrics: the notice while the broker has no registry, then charts
        go("#/metrics")
        installed = getattr(broker.broker, "metrics_registry", None) is None
        if installed:
            text_in("metrics-status", "metrics not available")
            broker.broker.metrics_registry = _registry()  # type: ignore[attr-defined]
        try:
            wait.until(lambda d: "messages in:" in d.find_element(By.ID, "charts").text)
            assert len(browser.find_elements(By.CSS_SELECTOR, "#charts canvas")) == 5
            shot("metrics")
        finally:
            if installed:
                del broker.broker.metrics_registry  # type: ignore[attr-defined]

        # Deleting the topic made above, after the browser's confirmation
        go("#/topics/from-browser")
        wait.until(ec.element_to_be_clickable((By.ID, "delete-topic"))).click()
        wait.until(ec.alert_is_present()).accept()
        text_in("topics-table", "orders")
        assert "from-browser" not in browser.find_element(By.ID, "topics-table").text
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        assert "from-browser" not in topics

    refused_reset = "/api/groups/live/offsets - Failed to load resource: the server responded " \
        "with a status of 409"  # fmt: skip
    errors = [
        e for e in browser.get_log("browser")
        if e["level"] == "SEVERE" and refused_reset not in e["message"]
    ]  # fmt: skip
    assert errors == []  # no script error, no resource refused by the page's policy
    print(f"console screenshots in {screenshots}")


def _registry() -> Any:
    """A registry with the message counter the charts read, counting on its own."""
    from prometheus_client import CollectorRegistry, Counter

    registry = CollectorRegistry()
    messages = Counter("kafka_server_brokertopicmetrics_messagesin", "", ["topic"],
                       registry=registry)  # fmt: skip

    class Growing:
        def collect(self) -> Any:
            messages.labels("orders").inc(100)
            return []

    registry.register(Growing())
    return registry
