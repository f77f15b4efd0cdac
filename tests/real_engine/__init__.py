"""The real-engine tier (a package, so its vLLM server stops when its last test has run)."""
