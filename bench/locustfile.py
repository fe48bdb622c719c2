"""Locust users for `python -m bench load`: an analyst who reads analysis pages (and their
progress JSON) and now and then uploads a small log. Signs in once per user."""

from __future__ import annotations

import os
import re

from locust import HttpUser, between, task

ANALYSIS = os.environ["KVSCOPE_LOAD_ANALYSIS"]
UPLOAD = os.environ["KVSCOPE_LOAD_UPLOAD"]
LOG = open(os.environ["KVSCOPE_LOAD_LOG"], "rb").read()  # noqa: SIM115
PASSWORD = os.environ["KVSCOPE_LOAD_PASSWORD"]
SERVER_TIMING = re.compile(r"app;dur=([0-9.]+)")
CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')


class Analyst(HttpUser):
    wait_time = between(0.2, 0.6)

    def on_start(self) -> None:
        page = self.client.get("/accounts/login/", name="login page")
        token = CSRF.search(page.content).group(1).decode()
        self.client.post("/accounts/login/", {"username": "loadtest", "password": PASSWORD,
                         "csrfmiddlewaretoken": token}, name="sign in")  # fmt: skip

    @task(6)
    def analysis_page(self) -> None:
        response = self.client.get(f"/analyses/{ANALYSIS}/", name="analysis page")
        # the server's own time (Server-Timing), beside the latency this client saw
        timing = SERVER_TIMING.search(response.headers.get("Server-Timing", ""))
        if timing:
            self.environment.events.request.fire(
                request_type="SERVER", name="analysis page (server)", response_length=0,
                response_time=float(timing.group(1)), exception=None, context={},
            )  # fmt: skip

    @task(3)
    def analysis_status(self) -> None:
        self.client.get(f"/analyses/{ANALYSIS}/status.json", name="analysis status.json")

    @task(2)
    def upload_page(self) -> None:
        self.client.get(f"/uploads/{UPLOAD}/", name="upload page")

    @task(1)
    def upload(self) -> None:
        page = self.client.get("/uploads/new/", name="upload form")
        token = CSRF.search(page.content).group(1).decode()
        with self.client.post(
            "/uploads/new/",
            data={"name": "load", "format": "auto", "block_sizes": "256",
                  "retention": "delete", "csrfmiddlewaretoken": token},
            files={"files": ("load.jsonl", LOG, "application/octet-stream")},
            name="upload (POST)", allow_redirects=False, catch_response=True,
        ) as response:  # fmt: skip
            if response.status_code != 302:
                response.failure(f"upload refused: {response.status_code}")
