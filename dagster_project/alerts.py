"""Where alerts go and when a release or the feed counts as late: the config file's ``alerts:`` and ``freshness:``
sections. ``AlertsResource`` sends one alert to a Slack-compatible webhook (``{"text": ...}`` POSTed) and by email
(SMTP, optional STARTTLS and login), each with a timeout and a bounded number of attempts; the sensors that raise
alerts are in ``dagster_project/sensors.py``, the freshness checks in ``dagster_project/freshness.py``.

Secrets never go in the file: a webhook URL that carries a token, and the SMTP login, are read at send time from
the variables the file names (``dg.EnvVar``), and every value read from them is cut out of what an alert says."""

import json
import smtplib
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import parse_qsl, urlsplit

import dagster as dg
import tenacity
from pydantic import Field, model_validator

REDACTED = "[redacted]"
MAX_WAIT_S = 60.0  # the longest wait between two attempts, however many there are


class AlertNotDelivered(Exception):
    """An alert that reached none, or not all, of its targets: raised so that the sensor's tick fails, visibly."""


class SmtpSettings(dg.Config):
    """Email over SMTP: one message per alert, to every address in ``to``."""

    host: str = ""  # the SMTP server; empty: no email
    port: int = Field(25, ge=1, le=65535)  # 25 (plain), 587 (submission, usually with starttls)
    sender: str = "veritas@localhost"  # the From address
    to: list[str] = Field(default_factory=list)  # the addresses every alert goes to
    starttls: bool = False  # upgrade the connection with STARTTLS before the login (the certificate is verified)
    username_env: str = ""  # the NAME of the variable that holds the login; empty: no login
    password_env: str = ""  # the NAME of the variable that holds the password, never the password

    @model_validator(mode="after")
    def _addressed(self):
        if self.host and not self.to:
            raise ValueError("smtp.host is set but smtp.to lists no address to send to")
        if bool(self.username_env) != bool(self.password_env):
            raise ValueError("smtp.username_env and smtp.password_env go together: name both variables, or neither")
        return self


@dataclass(frozen=True)
class Alert:
    """One alert: the subject line (an email's subject) and the text (the webhook's ``text``, the email's body)."""

    subject: str
    text: str


def _env(name: str, key: str) -> str:
    """The value of the variable ``name`` (named by ``key`` in the file); a ``ValueError`` when it is not set."""
    value = dg.EnvVar(name).get_value()
    if not value:
        raise ValueError(f"the variable {name} (alerts.{key}) is not set")
    return value


def _transient(error: BaseException) -> bool:
    """Whether another attempt may succeed: a network fault, a timeout, HTTP 408/429/5xx or an SMTP 4xx reply;
    never a refusal that will not change (HTTP 4xx, SMTP 5xx, a login refused, no STARTTLS on the server)."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in (408, 429) or error.code >= 500
    if isinstance(error, smtplib.SMTPNotSupportedError):
        return False
    if isinstance(error, smtplib.SMTPResponseException):
        return 400 <= error.smtp_code < 500
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return False
    return isinstance(error, OSError)  # refused, reset, timed out, the server hung up (SMTPServerDisconnected)


class AlertsResource(dg.ConfigurableResource):
    """Where alerts go: a Slack-compatible webhook and email; the Dagster UI's address for the link in each."""

    # the NAME of the variable that holds a Slack-compatible webhook URL (a Slack URL carries a secret token)
    webhook_url_env: str = ""
    webhook_url: str = ""  # a webhook URL that carries no secret (webhook_url_env is read first)
    smtp: SmtpSettings = SmtpSettings()  # email: its keys below
    ui_url: str = "http://127.0.0.1:3000"  # the Dagster UI's address: each alert links to the run or check there
    timeout_s: float = Field(10.0, gt=0)  # seconds one attempt to reach a target may take
    attempts: int = Field(3, ge=1, le=10)  # attempts per target before the alert counts as not delivered
    backoff_s: float = Field(2.0, ge=0)  # the wait after a failed attempt, doubled after each (at most 60 s)

    # ---- what is configured --------------------------------------------------------------------------------------
    @property
    def targets(self) -> list[str]:
        """The configured targets, by name: ``webhook`` and ``email``."""
        return [name for name, on in (("webhook", self.webhook_url_env or self.webhook_url),
                                      ("email", self.smtp.host)) if on]

    @property
    def has_targets(self) -> bool:
        return bool(self.targets)

    def link(self, path: str) -> str:
        """A page of the Dagster UI, e.g. ``runs/<run id>``."""
        return f"{self.ui_url.rstrip('/')}/{path.lstrip('/')}"

    # ---- secrets: read from the environment, cut out of every alert ---------------------------------------------
    def _webhook(self) -> str:
        return _env(self.webhook_url_env, "webhook_url_env") if self.webhook_url_env else self.webhook_url

    def secrets(self) -> list[str]:
        """Every value an alert must not show: the webhook URL, its query values and long path segments, the SMTP
        login's password; longest first, so that a secret inside another is cut with it."""
        found = [dg.EnvVar(self.smtp.password_env).get_value() or ""] if self.smtp.password_env else []
        for url in (dg.EnvVar(self.webhook_url_env).get_value() if self.webhook_url_env else None, self.webhook_url):
            if url:
                parts = urlsplit(url)
                found += [url, *(v for _, v in parse_qsl(parts.query)), parts.password or ""]
                # Slack's token is a path segment: /services/T.../B.../<token>
                found += [segment for segment in parts.path.split("/") if len(segment) >= 8]
        return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, REDACTED)
        return text

    def _where(self, target: str) -> str:
        """A target as messages name it: the webhook by its scheme, host and port only (never its path or query)."""
        if target == "email":
            return f"email via {self.smtp.host}:{self.smtp.port}"
        try:
            parts = urlsplit(self._webhook())
            return f"webhook {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
        except ValueError:
            return "webhook"

    # ---- sending --------------------------------------------------------------------------------------------------
    def _post_webhook(self, alert: Alert) -> None:
        request = urllib.request.Request(self._webhook(), data=json.dumps({"text": alert.text}).encode(),
                                         method="POST", headers={"Content-Type": "application/json",
                                                                 "User-Agent": "veritas-alerts"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            response.read(4096)

    def _send_email(self, alert: Alert) -> None:
        smtp = self.smtp
        message = EmailMessage()
        message["Subject"] = " ".join(alert.subject.split())  # one line: a header cannot hold a line break
        message["From"] = smtp.sender
        message["To"] = ", ".join(smtp.to)
        message.set_content(alert.text)
        with smtplib.SMTP(smtp.host, smtp.port, timeout=self.timeout_s) as client:
            if smtp.starttls:
                client.starttls(context=ssl.create_default_context())
            if smtp.username_env:
                client.login(_env(smtp.username_env, "smtp.username_env"), _env(smtp.password_env, "smtp.password_env"))
            client.send_message(message)

    def _attempts(self, where: str, log) -> tenacity.Retrying:
        def warn(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.warning(f"alert to {where}: attempt {state.attempt_number} of {self.attempts} failed "
                        f"({self.redact(str(error))}); trying again")

        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_exponential(multiplier=self.backoff_s, min=self.backoff_s, max=MAX_WAIT_S),
            retry=tenacity.retry_if_exception(_transient), before_sleep=warn, reraise=True)

    def send(self, alert: Alert, log) -> list[str]:
        """Send ``alert`` (its secrets cut out) to every target; the targets reached. Every target is tried, each
        with its attempts; then, if any was not reached (or none is configured), an error is logged for each and
        ``AlertNotDelivered`` raised, naming them."""
        alert = Alert(self.redact(alert.subject), self.redact(alert.text))
        if not self.has_targets:
            message = (f"alert not delivered, no target configured (alerts: webhook_url_env, webhook_url or "
                       f"smtp.host in the config file): {alert.subject}")
            log.error(message)
            raise AlertNotDelivered(message)
        senders = {"webhook": self._post_webhook, "email": self._send_email}
        reached, failed = [], []
        for target in self.targets:
            where = self._where(target)
            try:
                self._attempts(where, log)(senders[target], alert)
            except Exception as error:  # noqa: BLE001 - every failure is logged, then raised below with the others
                why = self.redact(f"{type(error).__name__}: {error}")
                log.error(f"ALERT NOT DELIVERED to {where}: {why}; the alert was: {alert.subject}")
                failed.append(f"{where} ({why})")
            else:
                reached.append(target)
        if failed:
            raise AlertNotDelivered(f"alert '{alert.subject}' not delivered to {'; '.join(failed)}"
                                    + (f" (delivered to {', '.join(reached)})" if reached else ""))
        log.info(f"alert delivered to {', '.join(reached)}: {alert.subject}")
        return reached


class FreshnessSettings(dg.ConfigurableResource):
    """When a release or the ClaimReview feed counts as late (``dagster_project/freshness.py``)."""

    days: int = Field(21, ge=0)  # a finished quarter without a release this many days after its end is late
    quarters: int = Field(4, ge=1)  # the finished quarters watched for their release, newest first
    # the feed counts as stale once review_snapshot has seen it unchanged for longer than this many days, and longer
    # than any quiet spell it had before
    feed_days: int = Field(14, ge=1)
