"""Parquet with fixed, deterministic options: the one encoding of the release's
tables and of the sealed bundle's (each writer calls it; neither calls the other).

zstd, dictionary encoding only for string columns (float columns gain nothing
from it and it is about 6x slower on wide omics tables), statistics on, one row
group per fixed group of participant blocks so the file layout never depends on
Dask chunking.  A named pandas index (``subject_id`` or ``protein``) is stored as a
column and restored by pandas; pyarrow, polars and duckdb see it as a column.
The long tables' default row numbers are not stored at all: pyarrow would
otherwise write them as a column ``__index_level_0__`` that polars and duckdb
show beside the data.
"""
from __future__ import annotations

import functools
import io
import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..bundle import PARQUET_COMPRESSION as COMPRESSION
from ..bundle import PARQUET_COMPRESSION_LEVEL as COMPRESSION_LEVEL

ROW_GROUP_ROWS = 10_000


def _dictionary_columns(table: pa.Table) -> list:
    return [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]


def writer_options(table_schema: pa.Schema, compression: str = COMPRESSION, level: int = COMPRESSION_LEVEL) -> dict:
    """Statistics (min/max in the footer) only for non-float columns: per-column
    summaries of measurements would let a reader spot an unusual column from the
    metadata alone, without analysing a single value."""
    dict_cols = [f.name for f in table_schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    stat_cols = [f.name for f in table_schema if not pa.types.is_floating(f.type)]
    return dict(compression=compression, compression_level=level, use_dictionary=dict_cols or False,
                write_statistics=stat_cols or False, version="2.6", data_page_version="1.0")


def _default_index(index: pd.Index) -> bool:
    """Row numbers 0 … n-1 without a name: what pandas gives a frame with no index of its own."""
    return (isinstance(index, pd.RangeIndex) and index.name is None and index.start == 0 and index.step == 1)


def to_arrow(df: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(df, preserve_index=not _default_index(df.index))


def table_bytes(df: pd.DataFrame | pa.Table, row_group_rows: int = ROW_GROUP_ROWS) -> bytes:
    table = df if isinstance(df, pa.Table) else to_arrow(df)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=max(1, row_group_rows), **writer_options(table.schema))
    return buf.getvalue()


def write_dataframe(output: Any, path: str, df: pd.DataFrame) -> None:
    output.write_bytes(path, table_bytes(df))


@functools.lru_cache(maxsize=8)
def _wide_schema(columns: tuple, index_name: str) -> pa.Schema:
    """The schema (pandas metadata included) ``pa.Table.from_pandas`` gives a float32
    frame with these columns and a named index of strings; it depends on no value.
    pyarrow's own conversion takes ~0.1 ms a column, so it is run on a frame of one
    column and its pandas metadata's column entry repeated for each column (the test
    holds the result to ``from_pandas`` on the whole frame)."""
    head = pd.DataFrame(np.zeros((1, 1), np.float32), columns=["x"], index=pd.Index(["x"], name=index_name, dtype=object))
    template = pa.Table.from_pandas(head, preserve_index=True).schema
    meta = json.loads(template.metadata[b"pandas"])
    entry, index_entries = meta["columns"][0], meta["columns"][1:]
    meta["columns"] = [dict(entry, name=c, field_name=c) for c in columns] + index_entries
    fields = [template.field(0).with_name(c) for c in columns] + [template.field(i) for i in range(1, len(template))]
    return pa.schema(fields, metadata={b"pandas": json.dumps(meta).encode("utf8")})


def wide_table(values: np.ndarray, columns: list, ids: list, index_name: str = "subject_id",
               empty_table: bool = False) -> pa.Table:
    """The Arrow table ``pa.Table.from_pandas`` gives for ``DataFrame(values.T, columns=columns,
    index=Index(ids, name=index_name, dtype=object))`` (NaN read as null), built from
    ``values`` float32 [columns, rows] (one column's values contiguous) without the frame:
    each column's buffer is used in place.  ``empty_table``: the whole table has no row,
    and its schema is the one pandas gives an empty index (a null-typed index column)."""
    if empty_table:
        df = pd.DataFrame(np.empty((0, len(columns)), np.float32), columns=columns,
                          index=pd.Index([], name=index_name, dtype=object))
        return pa.Table.from_pandas(df, preserve_index=True)
    schema = _wide_schema(tuple(columns), index_name)
    values = np.ascontiguousarray(values, dtype=np.float32)
    arrays = [pa.array(values[j], type=pa.float32(), from_pandas=True) for j in range(len(columns))]
    arrays.append(pa.array(list(ids), type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=schema)
