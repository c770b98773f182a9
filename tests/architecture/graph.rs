//! Loops in a directed graph of named nodes: the strongly connected groups of two or more
//! nodes, each a set of nodes that all reach one another.

use std::collections::{BTreeMap, BTreeSet};

/// Arrows `from -> to`.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every group of two or more nodes that reach one another (a node's own arrow to itself is
/// no loop here), each sorted, the groups in order of their first node.
pub fn loops(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph
        .iter()
        .flat_map(|(from, to)| std::iter::once(from).chain(to))
        .collect();
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reachable(graph, n))).collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if seen.contains(*n) {
            continue;
        }
        let group: Vec<String> = nodes
            .iter()
            .filter(|m| *m != n && reach[*n].contains(**m) && reach[**m].contains(*n))
            .map(|m| (*m).clone())
            .chain(std::iter::once((*n).clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        seen.extend(group.iter().cloned());
        if group.len() > 1 {
            out.push(group);
        }
    }
    out
}

/// Nodes reachable from `start` by one or more arrows.
fn reachable(graph: &Graph, start: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo: Vec<&str> = vec![start];
    while let Some(n) = todo.pop() {
        for m in graph.get(n).into_iter().flatten() {
            if out.insert(m.clone()) {
                todo.push(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(arrows: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (a, b) in arrows {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    }

    #[test]
    fn finds_direct_and_indirect_loops_and_nothing_else() {
        let g = graph(&[
            ("a", "b"),
            ("b", "a"),
            ("c", "d"),
            ("d", "e"),
            ("e", "c"),
            ("e", "f"),
            ("f", "f"),
            ("g", "a"),
        ]);
        assert_eq!(loops(&g), [vec!["a", "b"], vec!["c", "d", "e"]]);
    }

    #[test]
    fn a_layered_graph_has_no_loop() {
        let g = graph(&[("p", "t"), ("t", "s"), ("p", "s"), ("x", "x")]);
        assert!(loops(&g).is_empty());
    }
}
