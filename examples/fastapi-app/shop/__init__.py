"""A small shop: a FastAPI app with its own pages and routes, and agents mounted inside it."""
