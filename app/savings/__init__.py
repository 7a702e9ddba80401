"""The savings ledger: what the proxy saved, per wire format and model, kept at cache_url (ledger, store, tally),
shown at /savings (report) and on the page at /dashboard (page)."""
