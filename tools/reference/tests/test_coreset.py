"""SPEC 2.2: seed 000's hand-checked coreset and the restricted routing."""
import numpy as np
import pytest
import torch

from clover_ref.coreset import coreset_from_totals, coreset_totals, route_restricted


def seed_logits():
    # Row 0 puts .5/.3 on experts 0/1, row 1 .6/.2 on 2/0 (top-2 of four).
    return np.log(np.array([[0.5, 0.3, 0.1, 0.1], [0.2, 0.1, 0.6, 0.1]], np.float32))


def test_coreset_keeps_the_prefix_that_holds_top_p():
    # seed 000 `coreset_keeps_the_prefix_that_holds_top_p`: totals e0 .7, e1 .3, e2 .6,
    # e3 0 -> normalised .4375/.1875/.375/0; descending e0 (mass before 0), e2 (.4375),
    # e1 (.8125).
    totals = coreset_totals(seed_logits(), 2)
    assert totals == pytest.approx([0.7, 0.3, 0.6, 0.0], abs=1e-6)
    assert coreset_from_totals(totals, 0.8).tolist() == [True, False, True, False]
    assert coreset_from_totals(totals, 0.9).tolist() == [True, True, True, False]
    assert coreset_from_totals(totals, 0.0).tolist() == [True, False, False, False]


def test_ties_go_to_the_lower_index():
    totals = np.array([0.25, 0.25, 0.25, 0.25])
    assert coreset_from_totals(totals, 0.3).tolist() == [True, True, False, False]
    # per-row top-k with tied logits: experts 1 and 2 tie for second place; 1 wins.
    lg = np.log(np.array([[0.4, 0.2, 0.2, 0.2]], np.float32))
    assert np.nonzero(coreset_totals(lg, 2))[0].tolist() == [0, 1]


def test_routing_inside_the_coreset_renormalises():
    lg = torch.log(torch.tensor([[0.5, 0.3, 0.1, 0.1], [0.2, 0.1, 0.6, 0.1]]))
    allowed = np.array([True, False, True, False])
    index, weight = route_restricted(lg, allowed, 2)
    assert index.tolist() == [[0, 2], [2, 0]]
    assert weight[0].tolist() == pytest.approx([0.5 / 0.6, 0.1 / 0.6], rel=1e-6)
    assert weight[1].tolist() == pytest.approx([0.75, 0.25], rel=1e-6)


def test_fewer_allowed_than_k_routes_to_all_of_them():
    lg = torch.log(torch.tensor([[0.5, 0.3, 0.1, 0.1]]))
    index, weight = route_restricted(lg, np.array([False, True, False, False]), 2)
    assert index.tolist() == [[1]]
    assert weight.tolist() == [[1.0]]
