from django.contrib import admin

from console.models import Analysis, Upload


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "requests", "skipped_lines", "created_at")
    list_filter = ("status",)


@admin.register(Analysis)
class AnalysisAdmin(admin.ModelAdmin):
    list_display = ("upload", "created_at")
