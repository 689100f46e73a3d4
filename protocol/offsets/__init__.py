"""Committed offsets: commits, fetches and deletes, and their retention and expiry."""
