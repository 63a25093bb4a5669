"""One room per library campaign (the library seam: docs/extending.md, "Adding a library")."""
