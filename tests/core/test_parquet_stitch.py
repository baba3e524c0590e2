"""Molecular tables encoded row group by row group in parallel tasks and stitched
(``pipeline.writers.parquet_stitch``, ``graph.tasks.encode_row_group`` / ``stitch_parquet``):
the stitched file is byte for byte what pyarrow's single ``ParquetWriter`` wrote for the
same table (the pandas path the release used before), for any number of row groups, an
empty table included, and pandas, pyarrow, polars and duckdb read it."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.writers.parquet import wide_table, writer_options
from pipeline.writers.parquet_stitch import PATCH_ORDINAL, StitchError, footer_span, part_layout, stitch

COLUMNS = [f"PROT_{j:04d}" for j in range(37)]


def _groups(sizes, seed=0, nan_rate=0.01):
    """Per row group: float32 values [rows, columns] with NaN (missing), and subject ids."""
    rng = np.random.default_rng(seed)
    out, start = [], 0
    for n in sizes:
        x = rng.standard_normal((n, len(COLUMNS))).astype(np.float32)
        x[rng.random(x.shape) < nan_rate] = np.nan
        out.append((x, [f"SUBJ_{i:05d}" for i in range(start, start + n)]))
        start += n
    return out


def _frame_table(x, ids):
    df = pd.DataFrame(x, columns=COLUMNS, index=pd.Index(ids, name="subject_id", dtype=object))
    return pa.Table.from_pandas(df, preserve_index=True)


def _single_writer(tables, row_group_size=True) -> bytes:
    """What the release's assembly wrote before: one ParquetWriter, one row group per table."""
    buf, writer = io.BytesIO(), None
    for t in tables:
        if writer is None:
            writer = pq.ParquetWriter(buf, t.schema, **writer_options(t.schema))
        if row_group_size:
            writer.write_table(t, row_group_size=len(t) or 1)
        else:
            writer.write_table(t)
    writer.close()
    return buf.getvalue()


def _part(table, row_group_size=True) -> bytes:
    return _single_writer([table], row_group_size)


@pytest.mark.parametrize("sizes", [(1000,), (1000, 1000), (1000, 1000, 437), (3, 1, 2, 5, 8, 13, 21), (200,) * 16])
def test_stitched_row_groups_are_the_single_writers_bytes(sizes):
    groups = _groups(sizes, seed=len(sizes))
    want = _single_writer([_frame_table(x, ids) for x, ids in groups])
    parts = [_part(wide_table(np.ascontiguousarray(x.T), COLUMNS, ids)) for x, ids in groups]
    got = stitch(parts)
    assert got == want
    assert pq.ParquetFile(io.BytesIO(got)).metadata.num_row_groups == len(sizes)


def test_an_empty_table_is_the_single_writers_bytes():
    x, ids = np.zeros((0, len(COLUMNS)), np.float32), []
    for groups, row_group_size in ((1, False), (1, True), (3, True)):  # no block at all; empty row groups
        want = _single_writer([_frame_table(x, ids)] * groups, row_group_size)
        part = _part(wide_table(x.T, COLUMNS, ids, empty_table=True), row_group_size)
        assert stitch([part] * groups) == want
        assert len(pd.read_parquet(io.BytesIO(want))) == 0


def test_an_empty_row_group_among_others_is_stitched_as_written():
    """The pandas path could not write this (an empty group's index had another type); the
    stitch gives what one writer gives for the same Arrow tables."""
    groups = _groups((50, 0, 30))
    tables = [wide_table(np.ascontiguousarray(x.T), COLUMNS, ids) for x, ids in groups]
    assert stitch([_part(t) for t in tables]) == _single_writer(tables)


def test_wide_table_is_what_from_pandas_gives():
    (x, ids), = _groups((300,))
    a, b = wide_table(np.ascontiguousarray(x.T), COLUMNS, ids), _frame_table(x, ids)
    assert a.equals(b) and a.schema.equals(b.schema, check_metadata=True)
    for columns in (["PROT_0000"], [f"TRANS_{j:04d}" for j in range(2941)]):  # the schema is built from a template
        df = pd.DataFrame(np.ones((2, len(columns)), np.float32), columns=columns,
                          index=pd.Index(["SUBJ_1", "SUBJ_2"], name="subject_id", dtype=object))
        want = pa.Table.from_pandas(df, preserve_index=True)
        got = wide_table(np.ones((len(columns), 2), np.float32), columns, ["SUBJ_1", "SUBJ_2"])
        assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
        assert got.schema.metadata == want.schema.metadata


def test_every_reader_reads_the_stitched_file(tmp_path):
    groups = _groups((120, 80, 50), nan_rate=0.05)
    path = tmp_path / "proteomics.parquet"
    path.write_bytes(stitch([_part(wide_table(np.ascontiguousarray(x.T), COLUMNS, ids)) for x, ids in groups]))
    x = np.concatenate([g[0] for g in groups])
    ids = [i for g in groups for i in g[1]]
    df = pd.read_parquet(path)
    assert list(df.index) == ids and list(df.columns) == COLUMNS
    np.testing.assert_array_equal(df.to_numpy(), x)  # NaN where missing
    t = pq.read_table(path)
    assert t.column("subject_id").to_pylist() == ids and t.num_rows == len(ids)
    assert t.column(COLUMNS[3]).null_count == int(np.isnan(x[:, 3]).sum())
    polars = pytest.importorskip("polars")
    pl = polars.read_parquet(path)
    assert pl["subject_id"].to_list() == ids
    np.testing.assert_array_equal(pl[COLUMNS[5]].to_numpy(), x[:, 5])
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    n, nulls = con.execute(f"SELECT count(*), count(*) - count({COLUMNS[7]}) FROM read_parquet('{path}')").fetchone()
    assert (n, nulls) == (len(ids), int(np.isnan(x[:, 7]).sum()))
    s = con.execute(f"SELECT sum({COLUMNS[2]}) FROM read_parquet('{path}')").fetchone()[0]
    assert s == pytest.approx(float(np.nansum(x[:, 2].astype(np.float64))), rel=1e-6)


def test_the_layout_gives_the_parts_own_footer_back():
    (x, ids), = _groups((64,))
    part = _part(wide_table(np.ascontiguousarray(x.T), COLUMNS, ids))
    lo, hi = footer_span(part[-8:], len(part))
    layout = part_layout(part[lo:hi])
    assert json.loads(json.dumps(layout)) == layout
    assert layout["num_rows"] == 64 and len(layout["row_groups"]) == 1
    # a data page offset per column (the index column's too), the index column's dictionary
    # page, the row group's offset (pyarrow 26 writes no row group ordinal; others may)
    assert len(layout["patches"]) - sum(p[2] == PATCH_ORDINAL for p in layout["patches"]) == len(COLUMNS) + 1 + 1 + 1
    assert stitch([part]) == part


@pytest.mark.parametrize("extra", [{"write_page_index": True}, {"bloom_filter_options": {"subject_id": True}}])
def test_parts_with_structures_after_the_row_groups_are_refused(extra):
    (x, ids), = _groups((20,))
    t = wide_table(np.ascontiguousarray(x.T), COLUMNS, ids)
    buf = io.BytesIO()
    try:
        writer = pq.ParquetWriter(buf, t.schema, **writer_options(t.schema), **extra)
    except TypeError:
        pytest.skip(f"this pyarrow has no {extra}")
    writer.write_table(t)
    writer.close()
    with pytest.raises(StitchError):
        stitch([buf.getvalue()])


def test_not_parquet_is_refused():
    with pytest.raises(StitchError):
        stitch([b"PAR1" + b"\0" * 20])
    with pytest.raises(StitchError):
        stitch([])


@pytest.mark.parametrize("visit2", [False, True])
def test_the_tasks_write_what_the_single_writer_wrote(tmp_path, visit2):
    """``encode_row_group`` on each group of ten blocks' partitions and ``stitch_parquet``
    give the file (and its SHA-256 and size, as written) that one ParquetWriter gave for the
    whole table, row group by row group; the parts are removed."""
    import hashlib
    from types import SimpleNamespace

    from pipeline.graph.partitions import Partitions
    from pipeline.graph.tasks import ROW_GROUP_BLOCKS, _npy_bytes, column_stage, encode_row_group, stitch_parquet
    from pipeline.outputs import Output

    n_blocks, block = 23, 40
    world = SimpleNamespace(id="w", subject_width=5, protein_ids=COLUMNS, n=n_blocks * block)
    rng = np.random.default_rng(3)
    keep = rng.random(world.n) < (0.2 if visit2 else 2.0)
    table = "proteomics_visit2" if visit2 else "proteomics"
    output = Output(str(tmp_path), world.id)
    parts = Partitions(output, column_stage(table))
    blocks = []
    for b in range(n_blocks):
        rows = np.flatnonzero(keep[b * block:(b + 1) * block]) + b * block
        x = rng.standard_normal((len(rows), len(COLUMNS))).astype(np.float32)
        x[rng.random(x.shape) < 0.02] = np.nan
        parts.save(b, _npy_bytes(np.ascontiguousarray(x.T)))
        blocks.append((rows, x))
    tables, results = [], []
    for part, g in enumerate(range(0, n_blocks, ROW_GROUP_BLOCKS)):
        group = blocks[g:g + ROW_GROUP_BLOCKS]
        rows = np.concatenate([r for r, _ in group])
        x = np.concatenate([v for _, v in group])
        tables.append(_frame_table(x, [f"SUBJ_{i:05d}" for i in rows]))
        results.append(encode_row_group(world, str(tmp_path), table, part, list(range(g, g + len(group))), rows))
    dest = output.release + "/" + table + ".parquet"
    res = stitch_parquet(str(tmp_path), world.id, table, [r["path"] for r in results], dest)
    data = open(dest, "rb").read()
    assert data == _single_writer(tables)
    assert (res["size"], res["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert not any(p.suffix in (".parquet", ".json") for p in (tmp_path / "w" / ".build").rglob("*") if p.is_file())
