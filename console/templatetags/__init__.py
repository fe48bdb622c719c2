"""Template filters that format numbers for the pages (console.format does the formatting)."""
