"""Alert receivers on 127.0.0.1: an SMTP server (aiosmtpd) and one HTTP server for the JSON webhook
(/webhook) and Slack's incoming webhook (/slack/...), and the Airflow connections that point every alert
channel at them. Everything received is kept, in order, for the tests to read."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ports import free_port

ALERT_TO = "oncall@example.test"


@dataclass
class Received:
    channel: str  # email, slack, webhook
    body: bytes
    meta: dict = field(default_factory=dict)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Receivers:
    """aiosmtpd for e-mail; one HTTP server for the JSON webhook (/webhook) and Slack (/slack/...)."""

    def __init__(self):
        self.messages: list[Received] = []
        self.lock = threading.Lock()
        self.smtp_port = free_port()
        self._smtp = None
        self._http = None

    def add(self, msg: Received) -> None:
        with self.lock:
            self.messages.append(msg)

    def all(self, channel: str | None = None) -> list[Received]:
        with self.lock:
            return [m for m in self.messages if channel in (None, m.channel)]

    def start(self) -> None:
        from aiosmtpd.controller import Controller

        receivers = self

        class SmtpHandler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
                receivers.add(
                    Received(
                        "email",
                        envelope.original_content or envelope.content,
                        {"from": envelope.mail_from, "to": list(envelope.rcpt_tos)},
                    )
                )
                return "250 Message accepted for delivery"

        self._smtp = Controller(SmtpHandler(), hostname="127.0.0.1", port=self.smtp_port)
        self._smtp.start()

        class HttpHandler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                channel = "slack" if self.path.startswith("/slack/") else "webhook"
                receivers.add(Received(channel, body, {"path": self.path, "type": self.headers.get("Content-Type")}))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")  # what Slack answers

            def log_message(self, *args):
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), HttpHandler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.http_port = self._http.server_port

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._smtp is not None:
            self._smtp.stop()

    def env(self) -> dict[str, str]:
        """What Airflow needs to send alerts to these receivers (all three channels)."""
        smtp = {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": self.smtp_port,
            "extra": {
                "disable_tls": True,
                "disable_ssl": True,
                "from_email": "airflow@example.test",
                "timeout": 10,
                "retry_limit": 0,
            },
        }
        slack = {
            "conn_type": "slackwebhook",
            "host": f"http://127.0.0.1:{self.http_port}/slack",
            "password": "T0TEST/B0TEST/xxxxxxxxxxxxxxxxxxxxxxxx",
        }
        return {
            "INFERENCE_ALERT_CHANNELS": "email,slack,webhook",
            "INFERENCE_ALERT_EMAIL_TO": ALERT_TO,
            # The webhook's URL is a secret held by an Airflow connection (HttpNotifier), never a plain variable.
            "AIRFLOW_CONN_INFERENCE_ALERT_WEBHOOK": json.dumps(
                {"conn_type": "http", "host": f"http://127.0.0.1:{self.http_port}/webhook"}
            ),
            "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(smtp),
            "AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT": json.dumps(slack),
        }
