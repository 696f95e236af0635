"""Issue 52, alerts: a failed run reaches a Slack-compatible webhook and an SMTP server (STARTTLS, login), both on
loopback, with its stage, quarter, error and UI link, and never with a secret; an alert that cannot be delivered
fails the sensor's tick after a bounded number of attempts; the sensors run by default only with a target."""

import datetime
import email
import email.policy
import http.server
import ipaddress
import json
import logging
import socket
import ssl
import threading
from pathlib import Path

import dagster as dg
import pytest
import yaml
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from dagster_project.alerts import (
    Alert,
    AlertNotDelivered,
    AlertsResource,
    SmtpSettings,
)
from dagster_project.config import ConfigError, load_config
from dagster_project.definitions import build_definitions
from dagster_project.sensors import alert_sensors
from tests.conftest import write_demo_config

TOKEN = "xoxb-hook-T0K3N-5ecret"  # in the webhook URL's query (and path: Slack puts its token there)
PASSWORD = "smtp-pa55word-5ecret"
SECRET_ENV = {"VERITAS_TEST_WEBHOOK": None, "VERITAS_TEST_SMTP_USER": "alerts@example.org",
              "VERITAS_TEST_SMTP_PASSWORD": PASSWORD}


# ---- a webhook and an SMTP server on loopback ---------------------------------------------------------------------

class Webhook:
    """A loopback HTTP server that records every POST and answers with the statuses queued (then 200)."""

    def __init__(self):
        self.posts: list[dict] = []
        self.statuses: list[int] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts.append({"path": self.path, "type": self.headers["Content-Type"], "body": body})
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/services/T000/B000/{TOKEN}?token={TOKEN}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def texts(self) -> list[str]:
        return [json.loads(p["body"])["text"] for p in self.posts]


@pytest.fixture
def webhook(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    hook = Webhook()
    monkeypatch.setenv("VERITAS_TEST_WEBHOOK", hook.url)
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own issuer) and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), True)
            .add_extension(ski, False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "smtp.crt", folder / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class Mailbox:
    """What the SMTP server received: each message's raw bytes and decoded text, and whether it came over TLS after
    a login."""

    def __init__(self):
        self.messages: list[dict] = []
        self.logins: list[tuple[str, str]] = []

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append({"raw": envelope.content, "subject": message["Subject"],
                              "text": message.get_body().get_content(), "to": list(envelope.rcpt_tos),
                              "tls": session.ssl is not None, "authenticated": session.authenticated})
        return "250 Message accepted"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login.decode(), auth_data.password.decode()) == (
            SECRET_ENV["VERITAS_TEST_SMTP_USER"], PASSWORD)
        self.logins.append((mechanism, "ok" if ok else "refused"))
        return AuthResult(success=ok, handled=False)  # handled=False: the server answers 535 itself


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mailbox(tmp_path, monkeypatch):
    """An SMTP server on loopback that requires STARTTLS before the login; the client trusts its certificate."""
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # what ssl.create_default_context() trusts
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port(), tls_context=server_tls,
                            require_starttls=True, authenticator=box.authenticate, auth_required=True,
                            auth_exclude_mechanism=["LOGIN"])  # PLAIN only: one login per connection
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


@pytest.fixture
def secrets(monkeypatch, webhook):
    for name, value in SECRET_ENV.items():
        if value is not None:
            monkeypatch.setenv(name, value)


def alerts_to(webhook: Webhook, mailbox: Mailbox, **extra) -> AlertsResource:
    return AlertsResource(
        webhook_url_env="VERITAS_TEST_WEBHOOK", ui_url="http://127.0.0.1:3999/",
        smtp=SmtpSettings(host="127.0.0.1", port=mailbox.port, sender="veritas@example.org", to=["ops@example.org"],
                          starttls=True, username_env="VERITAS_TEST_SMTP_USER",
                          password_env="VERITAS_TEST_SMTP_PASSWORD"),
        timeout_s=5, backoff_s=0, **extra)


def assert_no_secret(*texts) -> None:
    for text in texts:
        raw = text if isinstance(text, bytes) else text.encode()
        for secret in (TOKEN, PASSWORD):
            assert secret.encode() not in raw
            assert secret.replace("-", "=2D").encode() not in raw  # nor quoted-printable


# ---- a failed run of the real job ---------------------------------------------------------------------------------

def failing_config(folder: Path) -> tuple[str, Path]:
    """The demo config whose one source is a feed that is not there: its file name holds the webhook's token, so
    the step's error carries a secret, as an error naming a URL with a key would."""
    cfg = Path(write_demo_config(folder))
    raw = yaml.safe_load(cfg.read_text())
    missing = folder / f"feed-{TOKEN}.json"
    raw["sources"] = [{"kind": "datafeed", "path": str(missing)}]
    cfg.write_text(yaml.safe_dump(raw))
    return str(cfg), missing


def test_a_failed_run_alerts_the_webhook_and_the_mailbox_with_its_stage_quarter_error_and_link(
        tmp_path, webhook, mailbox, secrets):
    cfg, missing = failing_config(tmp_path)
    defs = build_definitions(cfg)
    sensor = defs.resolve_sensor_def("run_failure_alert")
    alerts = alerts_to(webhook, mailbox)
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources={"alerts": alerts}) as first:
            assert "Initiating" in sensor.evaluate_tick(first).skip_message  # the cursor starts at the newest event

        result = defs.resolve_job_def("all_stages").execute_in_process(
            partition_key="2020-04", instance=instance, raise_on_error=False)
        assert not result.success
        run_id = result.run_id

        with dg.build_sensor_context(instance=instance, cursor=first.cursor, resources={"alerts": alerts}) as tick:
            (reaction,) = sensor.evaluate_tick(tick).dagster_run_reactions
        assert reaction.error is None and reaction.dagster_run.run_id == run_id

        with dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources={"alerts": alerts}) as again:
            assert sensor.evaluate_tick(again).dagster_run_reactions == []  # one alert per failed run

    (post,) = webhook.posts
    assert post["type"] == "application/json" and post["path"].startswith("/services/")
    (text,) = webhook.texts()
    (mail,) = mailbox.messages
    assert mail["tls"] and mail["authenticated"] and mail["to"] == ["ops@example.org"]
    assert mailbox.logins and all(outcome == "ok" for _, outcome in mailbox.logins)
    for message in (text, mail["text"]):
        assert "stage: review_snapshot" in message
        assert "quarter: 2020Q2" in message
        assert "error: FileNotFoundError: [Errno 2] No such file or directory" in message
        assert f"link: http://127.0.0.1:3999/runs/{run_id}" in message
        assert f"{missing.parent}/feed-[redacted].json" in message  # the error's secret, cut out
    assert mail["subject"] == "veritas: review_snapshot failed for 2020Q2"
    assert_no_secret(post["body"], mail["raw"], mail["text"])


# ---- delivery: bounded attempts, and a loud failure ---------------------------------------------------------------

@dg.asset(partitions_def=dg.StaticPartitionsDefinition(["2025-10"]))
def articles():
    raise ValueError(f"the fetch failed at https://api.example.org/v1?key={PASSWORD}")


def failed_run_tick(alerts: AlertsResource):
    """A tiny failed run (stage ``articles``, quarter 2025Q4), then the tick of the run-failure sensor after it."""
    sensor = alert_sensors(alerts)[0]
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources={"alerts": alerts}) as first:
            sensor.evaluate_tick(first)
        assert not dg.materialize([articles], partition_key="2025-10", instance=instance, raise_on_error=False).success
        with dg.build_sensor_context(instance=instance, cursor=first.cursor, resources={"alerts": alerts}) as tick:
            (reaction,) = sensor.evaluate_tick(tick).dagster_run_reactions
        return reaction


def test_a_webhook_that_fails_is_tried_a_bounded_number_of_times_then_the_tick_fails_loudly(
        webhook, mailbox, secrets, capfd):
    webhook.statuses = [503, 500, 502, 500]
    reaction = failed_run_tick(alerts_to(webhook, mailbox, attempts=3))
    assert len(webhook.posts) == 3  # three attempts, no more
    assert len(mailbox.messages) == 1  # the other target still got the alert
    error = reaction.error.to_string()
    assert "AlertNotDelivered" in error and f"webhook http://127.0.0.1:{webhook.port}" in error
    assert "HTTP Error 502" in error and "(delivered to email)" in error  # the third answer
    # the sensor's log lines, as the daemon's would show them (the failed run's own log is also on stderr)
    logged = "\n".join(line for line in capfd.readouterr().err.splitlines() if "ALERT" in line or "alert " in line)
    assert f"ALERT NOT DELIVERED to webhook http://127.0.0.1:{webhook.port}" in logged
    assert "attempt 1 of 3 failed" in logged and "attempt 2 of 3 failed" in logged
    assert "the fetch failed at https://api.example.org/v1?key=[redacted]" in mailbox.messages[0]["text"]
    assert_no_secret(error, logged, mailbox.messages[0]["raw"], mailbox.messages[0]["text"],
                     *(p["body"] for p in webhook.posts))


def test_a_passing_fault_is_retried_and_a_refusal_is_not(webhook, mailbox, secrets):
    webhook.statuses = [503]
    assert failed_run_tick(alerts_to(webhook, mailbox)).error is None
    assert len(webhook.posts) == 2 and "stage: articles" in webhook.texts()[1]

    webhook.posts.clear()
    webhook.statuses = [404, 404, 404]
    reaction = failed_run_tick(alerts_to(webhook, mailbox))
    assert len(webhook.posts) == 1  # a 404 will not change: not tried again
    assert "HTTP Error 404" in reaction.error.to_string()


def test_an_smtp_server_without_starttls_or_a_wrong_password_fails_the_tick(webhook, mailbox, secrets, monkeypatch):
    monkeypatch.setenv("VERITAS_TEST_SMTP_PASSWORD", "wrong-" + PASSWORD)
    reaction = failed_run_tick(alerts_to(webhook, mailbox))
    error = reaction.error.to_string()
    assert "SMTPAuthenticationError" in error and f"email via 127.0.0.1:{mailbox.port}" in error
    assert mailbox.messages == [] and len(webhook.posts) == 1
    assert [outcome for _, outcome in mailbox.logins] == ["refused"]  # a refused login is not tried again

    plain = Mailbox()  # a server that offers no STARTTLS: the alert is not sent in the clear
    controller = Controller(plain, hostname="127.0.0.1", port=free_port(), auth_require_tls=False)
    controller.start()
    try:
        reaction = failed_run_tick(AlertsResource(smtp=SmtpSettings(host="127.0.0.1", port=controller.port,
                                                                    to=["ops@example.org"], starttls=True),
                                                  backoff_s=0))
    finally:
        controller.stop()
    assert "SMTPNotSupportedError" in reaction.error.to_string() and plain.messages == []


def test_a_variable_that_is_not_set_and_no_target_at_all_fail_loudly(webhook, monkeypatch):
    monkeypatch.delenv("VERITAS_TEST_WEBHOOK")
    reaction = failed_run_tick(AlertsResource(webhook_url_env="VERITAS_TEST_WEBHOOK", backoff_s=0))
    assert "the variable VERITAS_TEST_WEBHOOK (alerts.webhook_url_env) is not set" in reaction.error.to_string()

    # started by hand in the UI with nothing configured: the tick fails, it does not pass in silence
    reaction = failed_run_tick(AlertsResource())
    assert "no target configured" in reaction.error.to_string()
    with pytest.raises(AlertNotDelivered):
        AlertsResource().send(Alert("subject", "text"), logging.getLogger("test"))


# ---- the sensors in the code location, and the config sections ----------------------------------------------------

def config_file(folder: Path, **sections) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = Path(write_demo_config(folder))
    raw = yaml.safe_load(cfg.read_text())
    raw.update(sections)
    cfg.write_text(yaml.safe_dump(raw))
    return str(cfg)


def test_the_sensors_are_always_there_and_run_by_default_only_with_a_target(tmp_path):
    off = build_definitions(config_file(tmp_path / "off"))
    on = build_definitions(config_file(tmp_path / "on", alerts={"webhook_url_env": "SLACK_WEBHOOK_URL"},
                                       freshness={"days": 30, "feed_days": 7}))
    for defs, status in ((off, dg.DefaultSensorStatus.STOPPED), (on, dg.DefaultSensorStatus.RUNNING)):
        alerting = {s.name: s.default_status for s in defs.sensors if s.name != "audit_sensor"}  # its own test
        assert alerting == {"run_failure_alert": status, "freshness_alert": status}
    assert on.resources["alerts"].targets == ["webhook"] and on.resources["freshness"].days == 30
    checks = {(k.asset_key.to_user_string(), k.name) for c in on.asset_checks for k in c.check_keys}
    assert {("release", "release_freshness"), ("review_snapshot", "feed_freshness")} <= checks


@pytest.mark.parametrize(("sections", "message"), [
    ({"alerts": {"smtp": {"hots": "127.0.0.1"}}}, "alerts.smtp.hots: unknown key; did you mean host?"),
    ({"alerts": {"webhook_url_evn": "X"}}, "alerts.webhook_url_evn: unknown key; did you mean webhook_url_env?"),
    ({"alerts": {"smtp": {"host": "127.0.0.1"}}}, "smtp.host is set but smtp.to lists no address"),
    ({"alerts": {"attempts": 0}}, "alerts.attempts: must be greater than or equal to 1"),
    ({"freshness": {"days": "three weeks"}}, "freshness.days: must be a valid integer"),
    ({"freshness": {"feed_dyas": 3}}, "freshness.feed_dyas: unknown key; did you mean feed_days?"),
])
def test_a_wrong_alerts_or_freshness_section_is_refused_with_its_line(tmp_path, sections, message):
    with pytest.raises(ConfigError) as raised:
        load_config(config_file(tmp_path, **sections))
    assert message in str(raised.value) and "veritas.yaml:" in str(raised.value)
