from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from console import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("uploads/new/", views.upload_new, name="upload_new"),
    path("uploads/sample/", views.upload_sample, name="upload_sample"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload_detail"),
    path("uploads/<int:pk>/status.json", views.upload_status, name="upload_status"),
    path("uploads/<int:pk>/retry/", views.upload_retry_view, name="upload_retry"),
    path("uploads/<int:pk>/analyses/new/", views.analysis_new, name="analysis_new"),
    path("analyses/<int:pk>/", views.analysis_detail, name="analysis_detail"),
    path("analyses/<int:pk>/status.json", views.analysis_status, name="analysis_status"),
    path(
        "analyses/<int:pk>/download/<str:what>", views.analysis_download, name="analysis_download"
    ),
    path("compare/", views.compare, name="compare"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
