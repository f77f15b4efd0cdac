"""Dataset loaders and builders (HF datasets, parquet rows for slime's --prompt-data)."""
