"""``console.ssl.enabled``: the console serves HTTPS with the broker's ``ssl.*`` server
settings as ``listener.name.console.ssl.*`` overrides them. A client trusting the
development CA reads the API; plain HTTP gets no answer; headless Chromium loads the
overview over HTTPS; a console keystore that cannot be read stops the broker's start
with an error naming the setting."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.security.certificates import DevelopmentPki, write_development_pki

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(tmp_path_factory.mktemp("console-pki"))


@pytest.fixture(scope="module")
def broker(pki: DevelopmentPki) -> Iterator[sluice.EmbeddedBroker]:
    config = {"console.port": 0, "console.ssl.enabled": True,
              "listener.name.console.ssl.keystore.location": str(pki.broker)}  # fmt: skip
    with sluice.EmbeddedBroker(config=config) as embedded:
        yield embedded


def _console(broker: sluice.EmbeddedBroker) -> Any:
    assert broker.broker is not None and broker.broker.console is not None
    return broker.broker.console


def test_https_with_the_development_ca(broker: sluice.EmbeddedBroker, pki: DevelopmentPki) -> None:
    console = _console(broker)
    assert console.url == f"https://127.0.0.1:{console.port}/"
    context = ssl.create_default_context(cafile=str(pki.ca))
    with urllib.request.urlopen(console.url + "api/cluster", context=context, timeout=15) as r:
        cluster = json.loads(r.read())
    assert cluster["cluster_id"] == broker.broker.cluster_id  # type: ignore[union-attr]
    with urllib.request.urlopen(console.url, context=context, timeout=15) as r:
        assert r.status == 200 and b"<html" in r.read().lower()
    with pytest.raises(urllib.error.URLError) as refused:  # not trusted without the CA
        urllib.request.urlopen(console.url, context=ssl.create_default_context(), timeout=15)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_plain_http_gets_no_answer(broker: sluice.EmbeddedBroker) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", _console(broker).port, timeout=15)
    try:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError,
                            http.client.BadStatusLine)):  # fmt: skip
            connection.request("GET", "/")
            connection.getresponse()
    finally:
        connection.close()
    # The console still serves afterwards.
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(_console(broker).url, context=context, timeout=15) as r:
        assert r.status == 200


def test_the_overview_in_chromium_over_https(broker: sluice.EmbeddedBroker) -> None:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip("chromium and chromium-driver are not installed (scripts/run-tests.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage"):  # fmt: skip
        options.add_argument(argument)
    options.accept_insecure_certs = True  # the development CA is not the browser's
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(20)
        driver.get(_console(broker).url + "#/")
        cluster_id = broker.broker.cluster_id  # type: ignore[union-attr]
        WebDriverWait(driver, 20).until(
            ec.text_to_be_present_in_element((By.ID, "cluster-id"), cluster_id)
        )
        assert driver.current_url.startswith("https://")
    finally:
        driver.quit()


def test_an_unreadable_console_keystore_stops_the_start(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    config = {"console.port": 0, "console.ssl.enabled": True,
              "listener.name.console.ssl.keystore.location": missing}  # fmt: skip
    with pytest.raises(Exception) as failed:
        sluice.EmbeddedBroker(config=config, log_dir=tmp_path / "data").start()
    causes = []
    error: BaseException | None = failed.value
    while error is not None:
        causes.append(str(error))
        error = error.__cause__
    assert any("console.ssl.enabled" in cause and "missing.pem" in cause for cause in causes)
