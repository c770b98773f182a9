//! The linker script that places the code a run executes together at the start of the binary's
//! code, made from `build/link-order.txt` (written by `scripts/link-order.sh`); included by
//! `build.rs` and by the `cli` test binary (its tests below).

/// The output section the listed functions go to, placed before `.text` in the same segment.
pub const OUTPUT_SECTION: &str = ".text.hot";

/// The input sections named by `list`, in its order, each once: lines of `.text.` and a symbol
/// made of the characters of Rust's legacy mangling and of C names (`A-Z a-z 0-9 _ . $`).
/// Blank lines and `#` comments are skipped, and so is any other line, so that a hand-edited or
/// damaged list costs placement and never the build (a linker script would reject it).
pub fn sections(list: &str) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    list.lines()
        .map(str::trim)
        .filter(|line| {
            line.strip_prefix(".text.").is_some_and(|symbol| {
                !symbol.is_empty()
                    && symbol
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$'))
            })
        })
        .filter(|line| seen.insert(*line))
        .collect()
}

/// A GNU ld script for `-T` that places `sections` in this order in [`OUTPUT_SECTION`] and
/// inserts that before `.text` of the linker's default script (which stays in force: `INSERT`).
/// One input-section statement per name keeps the order (within one statement the linker
/// places sections in input order); a name the link does not have matches nothing, quietly.
pub fn linker_script(sections: &[&str]) -> String {
    let mut script = format!("SECTIONS\n{{\n  {OUTPUT_SECTION} :\n  {{\n");
    for section in sections {
        script.push_str("    *(");
        script.push_str(section);
        script.push_str(")\n");
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\n");
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_function_sections_in_order_once_each() {
        let list = "# made by scripts/link-order.sh\n\n\
                    .text._ZN9edgeplane4main17h0123456789abcdefE\n\
                    .text._ZN4core3ptr85drop_in_place$LT$alloc..sync..Arc$LT$u8$GT$$GT$17habcE\n  \
                    .text.memcpy_small  \n\
                    .text._ZN9edgeplane4main17h0123456789abcdefE\n";
        assert_eq!(
            sections(list),
            [
                ".text._ZN9edgeplane4main17h0123456789abcdefE",
                ".text._ZN4core3ptr85drop_in_place$LT$alloc..sync..Arc$LT$u8$GT$$GT$17habcE",
                ".text.memcpy_small",
            ]
        );
    }

    #[test]
    fn leaves_out_what_a_linker_script_cannot_hold() {
        let list = ".text.\n.data.table\n.text.a b\n.text.*\n.text.x)\n.text.é\n\
                    _ZN9edgeplane4main17hE\n.text.ok\n";
        assert_eq!(sections(list), [".text.ok"]);
    }

    #[test]
    fn script_has_one_statement_per_section_before_text() {
        let script = linker_script(&[".text.b", ".text.a"]);
        assert_eq!(
            script,
            "SECTIONS\n{\n  .text.hot :\n  {\n    *(.text.b)\n    *(.text.a)\n  }\n}\n\
             INSERT BEFORE .text;\n"
        );
    }
}
