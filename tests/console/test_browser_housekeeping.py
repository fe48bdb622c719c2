"""Housekeeping (#16) in a real browser (headless Chromium, as test_browser.py), by the
keyboard alone: rename an upload from its page, then delete it through the confirmation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.models import Upload
from console.uploads.storage import upload_folder
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in
from tests.console.test_housekeeping import data_dir

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page


def test_rename_and_delete_an_upload_by_the_keyboard(browser_page, analysis, analyst):
    page, upload = browser_page.page, analysis.upload
    before = data_dir()
    sign_in(page, analyst.username)
    page.goto(f"/uploads/{upload.pk}/")
    page.get_by_text("Rename or delete this upload").focus()
    page.keyboard.press("Enter")  # opens the panel
    page.keyboard.press("Tab")
    expect(page.get_by_label("New name")).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.type("Keyboard day")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Keyboard day")
    expect(page.locator(".flash.success")).to_contain_text("Renamed to “Keyboard day”")

    page.get_by_text("Rename or delete this upload").focus()
    page.keyboard.press("Enter")
    for _ in range(3):  # the name, Rename, then the link to the confirmation
        page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Delete this upload…")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Delete the upload “Keyboard day”?")
    confirm = page.get_by_label("Yes, delete this upload and everything listed above, for good")
    for _ in range(15):  # past the skip link, the menu and the crumbs
        page.keyboard.press("Tab")
        if confirm.evaluate("(box) => box === document.activeElement"):
            break
    expect(confirm).to_be_focused()
    page.keyboard.press("Space")
    expect(confirm).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Delete for good")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".flash.success")).to_contain_text(
        "Deleted the upload “Keyboard day”; the audit trail records it."
    )
    assert not Upload.objects.filter(pk=upload.pk).exists()
    # its block streams went (its raw file went after the ingest); kvscope's folders stay
    folder = upload_folder(upload.pk)
    assert any(p.is_relative_to(folder) for p in before)
    assert data_dir() == {p for p in before if not p.is_relative_to(folder)}
    browser_page.assert_clean()
