"""Every config field's rule is declared once, on its schema field
(``pipeline.config_schema.ruled``), and FIELD_RULES, the error messages and the docs
table (``pipeline.config_rules.rules_table``) derive from it: for every registered kind
of world, each leaf field of its config schema has a rule and each rule names a leaf."""
from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from pipeline import config_rules, config_schema, kinds
from pipeline.config_schema import RULE, INT, ConfigError, Rule, ruled

# Registering the config schemas makes every registered kind record its world schema.
config_schema.register_configs()
KINDS = sorted(kinds.registered())


def world_schema(kind: str):
    if kind == kinds.DEFAULT:
        return config_schema.WorldConfig
    assert kind in config_rules.WORLD_SCHEMAS, (
        f"kind {kind!r} declares no world schema with rules; valid: config_rules.register_world_schema(kind, cls)")
    return config_rules.WORLD_SCHEMAS[kind][0]


def test_every_kind_is_covered():
    assert {"biobank", "screening"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_leaf_field_has_a_rule_and_every_rule_a_leaf(kind):
    world = world_schema(kind)
    leaves = config_rules.schema_leaves(config_schema.RootConfig, world=world)
    declared = config_rules.declared_rules(config_schema.RootConfig, world=world)
    without = [name for name in leaves if not isinstance(declared.get(name), Rule)]
    assert not without, f"{kind}: schema fields without a rule: {without}"
    rules = config_rules.kind_rules(kind)
    assert set(rules) == set(leaves), (f"{kind}: rules naming no field {sorted(set(rules) - set(leaves))}, "
                                       f"fields without a rule {sorted(set(leaves) - set(rules))}")
    assert all(rules[name] is declared[name] for name in leaves), f"{kind}: a rule not the one its field declares"
    assert not config_rules.node_fields_with_rules(config_schema.RootConfig, world=world), \
        f"{kind}: a rule on a node field (no leaf to check)"


def test_the_panel_apps_own_fields_have_their_rules():
    panel_leaves = set(config_rules.schema_leaves(config_schema.PanelAppConfig)) - set(config_rules.FIELD_RULES)
    assert set(config_rules.PANEL_FIELD_RULES) == panel_leaves == {"panel.id", "panel.worlds", "jobs"}
    assert not config_rules.node_fields_with_rules(config_schema.PanelAppConfig)


def test_field_rules_keep_their_shape():
    """FIELD_RULES: dotted name -> Rule, in the schema's order (the order the checks run)."""
    assert list(config_rules.FIELD_RULES) == config_rules.schema_leaves()
    assert config_rules.FIELD_RULES["scale.participants"] is dataclasses.fields(config_schema.ScaleConfig)[1].metadata[RULE]
    assert config_rules.FIELD_RULES["world.seed"] is config_schema.SEED


def test_a_leaf_without_a_rule_is_refused():
    @dataclasses.dataclass
    class NoRule:
        kind: str = ruled(config_schema.CHOICE("norule"), "norule")
        size: int = 3  # no rule

    with pytest.raises(ValueError, match=r"world kind 'norule-test' \(NoRule\): fields without a rule \['world.size'\]"):
        config_rules.register_world_schema("norule-test", NoRule)
    assert "norule-test" not in config_rules.WORLD_SCHEMAS


def test_the_error_message_comes_from_the_declared_rule():
    rule = config_rules.FIELD_RULES["scale.proteins"]
    cfg = OmegaConf.create({"scale": {"proteins": 20_000}})
    with pytest.raises(ConfigError) as err:
        config_rules.check_fields(cfg, {"scale.proteins": rule})
    assert str(err.value) == f"scale.proteins: 20000 is invalid; valid: {rule.valid()}"
    assert rule.valid() == "integer in [1, 10,000] (PROT_xxxx identifiers have four digits)"
    assert INT(1, 10_000, why="PROT_xxxx identifiers have four digits") == rule


@pytest.mark.parametrize("kind", [*KINDS, "panel"])
def test_rules_table_has_one_row_per_field(kind):
    rows = config_rules.rules_table(kind)
    if kind == "panel":  # the panel app's fields besides a world's
        rules = {k: r for k, r in {**config_rules.FIELD_RULES, **config_rules.PANEL_FIELD_RULES}.items()
                 if not k.startswith("world.")}
        assert list(rules)[-3:] == ["panel.id", "panel.worlds", "jobs"]
    else:
        rules = config_rules.kind_rules(kind)
    assert [row["field"] for row in rows] == list(rules)
    for row in rows:
        assert set(row) == {"field", "type", "default", "rule"}
        assert all(isinstance(v, str) and v for v in row.values()), row
        assert row["rule"] == rules[row["field"]].valid()


def test_rules_table_rows():
    rows = {row["field"]: row for row in config_rules.rules_table()}
    assert rows["world.id"] == {"field": "world.id", "type": "str", "default": "???", "rule": config_schema.NAME.valid()}
    assert rows["world.driver_weight"]["type"] == "list of float"
    assert rows["world.driver_weight"]["default"] == "[0.3, 0.45]"
    assert rows["cluster.n_workers"]["type"] == "int or null" and rows["cluster.n_workers"]["default"] == "null"
    assert rows["world.bias_params.T4.shared"]["default"] == "true"
    screening = {row["field"]: row for row in config_rules.rules_table("screening")}
    assert screening["world.pocket.n_points"]["default"] == "10"
    assert screening["world.offtarget.n_points"]["default"] == "6"  # the node's own default instance
    with pytest.raises(ValueError, match="not a registered world kind"):
        config_rules.rules_table("no-such-kind")
