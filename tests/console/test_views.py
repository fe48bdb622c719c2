from __future__ import annotations

import pytest
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db


def test_pages_need_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_signed_in_user_sees_the_empty_state(client):
    user = User.objects.create_user("ana", password="a-long-passphrase")
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    assert b"No uploads yet" in response.content


def test_healthz_answers_without_sign_in(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok"
