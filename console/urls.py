from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from console import health, housekeeping_urls
from console.benchmarks import views as benchmark_views
from console.glossary_page import glossary_view
from console.policies import audit_views, drift_views, pack_views, views as policy_views
from console.signin import ThrottledAuthenticationForm
from console.uploads import comparison, planner_views, views as upload_views

urlpatterns = [
    path("", upload_views.home, name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("uploads/new/", upload_views.upload_new, name="upload_new"),
    path("uploads/sample/", upload_views.upload_sample, name="upload_sample"),
    path("uploads/<int:pk>/", upload_views.upload_detail, name="upload_detail"),
    path("uploads/<int:pk>/status.json", upload_views.upload_status, name="upload_status"),
    path("uploads/<int:pk>/retry/", upload_views.upload_retry_view, name="upload_retry"),
    path("uploads/<int:pk>/replay/", upload_views.upload_replay, name="upload_replay"),
    path(
        "uploads/<int:pk>/replay.jsonl",
        upload_views.upload_replay_download,
        name="upload_replay_download",
    ),
    path("uploads/<int:pk>/analyses/new/", upload_views.analysis_new, name="analysis_new"),
    path("analyses/<int:pk>/", upload_views.analysis_detail, name="analysis_detail"),
    path("analyses/<int:pk>/buys.json", planner_views.analysis_buys, name="analysis_buys"),
    path("analyses/<int:pk>/status.json", upload_views.analysis_status, name="analysis_status"),
    path("analyses/<int:pk>/retry/", upload_views.analysis_retry_view, name="analysis_retry"),
    path(
        "analyses/<int:pk>/download/<str:what>",
        upload_views.analysis_download,
        name="analysis_download",
    ),
    path("compare/", comparison.compare, name="compare"),
    path("glossary/", glossary_view, name="glossary"),
    path("evidence/", benchmark_views.benchmark_list, name="evidence_list"),
    path("evidence/matrix/", benchmark_views.benchmark_matrix, name="evidence_matrix"),
    path("evidence/compare/", benchmark_views.benchmark_compare, name="evidence_compare"),
    path("evidence/runs.csv", benchmark_views.benchmark_runs_csv, name="evidence_runs_csv"),
    path("evidence/runs/<int:pk>/", benchmark_views.benchmark_run, name="evidence_run"),
    path(
        "evidence/runs/<int:pk>/raw.json",
        benchmark_views.benchmark_run_raw,
        name="evidence_run_raw",
    ),
    path("policies/", policy_views.policy_list, name="policy_list"),
    path("policies/new/", policy_views.policy_new, name="policy_new"),
    path("policies/audit/", audit_views.audit_log, name="audit_log"),
    path("policies/audit/export.<str:fmt>", audit_views.audit_export, name="audit_export"),
    path("policies/versions/<int:pk>/", policy_views.version_detail, name="policy_version"),
    path("policies/versions/<int:pk>/edit/", policy_views.version_edit, name="policy_edit"),
    path(
        "policies/versions/<int:pk>/submit/", policy_views.version_submit_view, name="policy_submit"
    ),
    path(
        "policies/versions/<int:pk>/request-changes/",
        policy_views.version_request_changes_view,
        name="policy_request_changes",
    ),
    path(
        "policies/versions/<int:pk>/approve/",
        policy_views.version_approve_view,
        name="policy_approve",
    ),
    path(
        "policies/versions/<int:pk>/new-version/",
        policy_views.version_new_view,
        name="policy_new_version",
    ),
    path(
        "policies/versions/<int:pk>/delete/", policy_views.version_delete_view, name="policy_delete"
    ),
    path(
        "policies/versions/<int:pk>/retire/", policy_views.policy_retire_view, name="policy_retire"
    ),
    path("policies/versions/<int:pk>/sign-off/", policy_views.signoff_page, name="policy_signoff"),
    path(
        "policies/versions/<int:pk>/export/<str:kind>",
        policy_views.version_export,
        name="policy_export",
    ),
    path(
        "policies/versions/<int:pk>/evidence-pack.zip",
        pack_views.evidence_pack,
        name="policy_evidence_pack",
    ),
    path(
        "policies/versions/<int:pk>/drift/",
        drift_views.drift_check_new,
        name="policy_drift_new",
    ),
    path("policies/drift/<int:pk>/", drift_views.drift_check_detail, name="policy_drift_check"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # renaming and deleting uploads, analyses and benchmark runs
    *housekeeping_urls.urlpatterns,
]
