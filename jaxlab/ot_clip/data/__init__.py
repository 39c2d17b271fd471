"""The user's own image-text pairs from disk, for the two-tower task (``jaxlab.tasks.clip_files``).

``captions`` (a CSV/JSONL file naming the images of a folder; a CSV's layout, jaxlab's or
open_clip's, in ``csv_layout``), ``images`` (decoding), ``shards`` (webdataset tar shards:
``brace`` patterns, ``tar_index``),
``embeddings`` (precomputed paired embeddings: .npy / .npz / Parquet), ``tokenizer`` (a
``tokenizers`` tokenizer trained on the captions or given), ``split`` (the held-out split),
``batches`` (grain-ordered, per-process global batches, a pure function of (seed, step)) and
``pairs`` (all of it from the config's ``data`` block).
"""
