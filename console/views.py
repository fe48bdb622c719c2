"""Pages. Thin: they read rows and hand them to templates."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.models import Upload


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@login_required
def home(request: HttpRequest) -> HttpResponse:
    uploads = Upload.objects.all()[:50]
    return render(request, "console/home.html", {"uploads": uploads})
