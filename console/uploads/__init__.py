"""The uploads wing: logs uploaded in the browser, their ingest, and the analyses of them."""
