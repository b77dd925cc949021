//! Structures, sequences, FASTA, contigs and hotspots, against the debug target and hand-made
//! inputs.

use lachesis_protein::contigs::{
    ContigError, ContigSegment, Contigs, Hotspot, parse_hotspots, surface_hotspots,
    validate_hotspots,
};
use lachesis_protein::structure::{
    DEBUG_TARGET_PDB, FastaRecord, MAX_ATOMS, MAX_PDB_BYTES, Structure, StructureError, one_letter,
    parse_fasta, three_letter, validate_sequence, write_fasta,
};
use proptest::prelude::*;

fn debug_target() -> Structure {
    Structure::from_pdb(DEBUG_TARGET_PDB).expect("the debug target parses")
}

/// The CA B-factors read straight from the text (columns 61-66), independently of pdbtbx.
fn ca_b_factors_from_text(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with("ATOM") && l.get(12..16).map(str::trim) == Some("CA"))
        .map(|l| l[60..66].trim().parse::<f64>().expect("a B-factor"))
        .collect()
}

#[test]
fn debug_target_parses_as_one_chain_of_29_residues() {
    let target = debug_target();
    assert_eq!(target.chains.len(), 1);
    let chain = target.chain("A").expect("chain A");
    assert_eq!(chain.residues.len(), 29);
    assert_eq!(target.residue_count(), 29);
    let atoms: usize = chain.residues.iter().map(|r| r.atoms.len()).sum();
    assert_eq!(atoms, 257);
    let sequence = target.sequence("A").expect("a sequence");
    assert!(sequence.starts_with("EYFTLQ"), "{sequence}");
    assert_eq!(sequence.len(), 29);
    assert!(target.sequence("B").is_none());
    assert_eq!(chain.backbone().expect("full backbone").len(), 29);

    let expected = ca_b_factors_from_text(DEBUG_TARGET_PDB);
    assert_eq!(expected.len(), 29);
    let mean = expected.iter().sum::<f64>() / expected.len() as f64;
    let plddt = target.mean_plddt().expect("a mean pLDDT");
    assert!((plddt - mean).abs() < 1e-9, "{plddt} vs {mean}");
    assert!((chain.plddt().expect("chain pLDDT") - mean).abs() < 1e-9);
}

#[test]
fn trace_carries_cas_and_plddt_only_for_predictions() {
    let target = debug_target();
    let predicted = target.trace(true);
    assert_eq!(predicted.chains.len(), 1);
    let residues = &predicted.chains[0].residues;
    assert_eq!(residues.len(), 29);
    assert_eq!(residues[0].number, 1);
    assert_eq!(residues[0].code, 'E');
    assert_eq!(residues[0].ca, [13.309, 2.271, -20.321]);
    assert_eq!(residues[0].plddt, Some(61.0));
    assert!(
        target.trace(false).chains[0]
            .residues
            .iter()
            .all(|r| r.plddt.is_none())
    );
}

#[test]
fn pdb_round_trip_keeps_coordinates_and_b_factors() {
    let target = debug_target();
    let text = target.to_pdb();
    let again = Structure::from_pdb(&text).expect("written PDB parses");
    assert_eq!(again.chains.len(), target.chains.len());
    for (a, b) in target.chains.iter().zip(&again.chains) {
        assert_eq!(a.id, b.id);
        assert_eq!(a.residues.len(), b.residues.len());
        for (ra, rb) in a.residues.iter().zip(&b.residues) {
            assert_eq!((ra.number, &ra.name), (rb.number, &rb.name));
            assert_eq!(ra.atoms.len(), rb.atoms.len());
            for (x, y) in ra.atoms.iter().zip(&rb.atoms) {
                assert_eq!(x.name, y.name);
                assert_eq!(x.element, y.element);
                for k in 0..3 {
                    assert!((x.position[k] - y.position[k]).abs() < 1e-3);
                }
                assert!((x.b_factor - y.b_factor).abs() < 1e-3);
            }
        }
    }
    // Serials are renumbered from 1 and occupancy is 1.0.
    let first_atom = text
        .lines()
        .find(|l| l.starts_with("ATOM"))
        .expect("an ATOM line");
    assert_eq!(
        first_atom,
        "ATOM      1  N   GLU A   1      13.763   3.527 -20.910  1.00 61.00           N"
    );
    assert!(text.contains("\nTER     258      GLN A  29\n"), "{text}");
}

#[test]
fn bad_pdb_inputs_give_typed_errors() {
    assert_eq!(Structure::from_pdb(""), Err(StructureError::Empty));
    assert_eq!(
        Structure::from_pdb("hello, this is not a PDB file\n"),
        Err(StructureError::Empty)
    );
    let garbage =
        "ATOM      1  CA  GLY A   1      xx.xxx   1.000   2.000  1.00 50.00           C\n";
    assert_eq!(
        Structure::from_pdb(garbage),
        Err(StructureError::BadAtomRecord {
            line: 1,
            reason: "a coordinate (columns 31-54) is not a finite number"
        })
    );
    let bad_number =
        "ATOM      1  CA  GLY A  x1       0.000   1.000   2.000  1.00 50.00           C\n";
    match Structure::from_pdb(bad_number) {
        Err(StructureError::Parse(message)) => assert!(message.len() <= 200, "{message}"),
        other => panic!("expected a parse error, got {other:?}"),
    }
    let no_ca = "ATOM      1  N   GLY A   1       0.000   1.000   2.000  1.00 50.00           N\n\
                 HETATM    2  O   HOH A   2       5.000   1.000   2.000  1.00 50.00           O\n";
    assert_eq!(
        Structure::from_pdb(no_ca),
        Err(StructureError::NoAlphaCarbon)
    );

    let line = "ATOM      1  CA  GLY A   1       0.000   1.000   2.000  1.00 50.00           C\n";
    let many = line.repeat(MAX_ATOMS + 1);
    assert!(matches!(
        Structure::from_pdb(&many),
        Err(StructureError::TooManyAtoms { atoms, .. }) if atoms == MAX_ATOMS + 1
    ));
    let huge = "REMARK".repeat(MAX_PDB_BYTES / 6 + 1);
    assert!(matches!(
        Structure::from_pdb(&huge),
        Err(StructureError::TooLarge { .. })
    ));

    let mut missing_o = debug_target();
    missing_o.chains[0].residues[3]
        .atoms
        .retain(|a| a.name != "O");
    assert_eq!(
        missing_o.chains[0].backbone(),
        Err(StructureError::MissingBackboneAtom {
            chain: "A".into(),
            residue: 4,
            atom: "O"
        })
    );
}

#[test]
fn amino_acid_codes_and_sequences() {
    assert_eq!(one_letter("TRP"), 'W');
    assert_eq!(one_letter("gly"), 'G');
    assert_eq!(one_letter("MSE"), 'M');
    assert_eq!(one_letter("HOH"), 'X');
    assert_eq!(three_letter('K'), Some("LYS"));
    assert_eq!(three_letter('B'), None);
    for code in "ACDEFGHIKLMNPQRSTVWY".chars() {
        assert_eq!(one_letter(three_letter(code).expect("standard")), code);
    }
    assert_eq!(validate_sequence("ACDEFGHIKLMNPQRSTVWY", 20), Ok(()));
    assert_eq!(
        validate_sequence("", 10),
        Err(StructureError::EmptySequence)
    );
    assert_eq!(
        validate_sequence("AAAAA", 4),
        Err(StructureError::SequenceTooLong { length: 5, max: 4 })
    );
    assert_eq!(
        validate_sequence("ACxD", 10),
        Err(StructureError::InvalidResidue {
            position: 3,
            letter: 'x'
        })
    );
    assert_eq!(
        validate_sequence("ACBD", 10),
        Err(StructureError::InvalidResidue {
            position: 3,
            letter: 'B'
        })
    );
}

#[test]
fn fasta_round_trip_and_errors() {
    let long: String = "ACDEFGHIKLMNPQRSTVWY".repeat(9);
    let records = vec![
        FastaRecord {
            header: "target one".into(),
            sequence: long.clone(),
        },
        FastaRecord {
            header: "binder".into(),
            sequence: "EELLKK".into(),
        },
    ];
    let text = write_fasta(&records);
    assert!(text.lines().all(|l| l.len() <= 80));
    assert_eq!(parse_fasta(&text), Ok(records));

    let messy = "\n>a\nACD\n\nEFG\n>b desc\r\nKL\n";
    let parsed = parse_fasta(messy).expect("parses");
    assert_eq!(parsed[0].sequence, "ACDEFG");
    assert_eq!(parsed[1].header, "b desc");
    assert_eq!(parsed[1].sequence, "KL");
    assert_eq!(
        parse_fasta("ACD\n>a\nK\n"),
        Err(StructureError::FastaSequenceBeforeHeader { line: 1 })
    );
    assert_eq!(
        parse_fasta(">a\n>b\nK\n"),
        Err(StructureError::FastaEmptySequence { header: "a".into() })
    );
    assert_eq!(parse_fasta("\n\n"), Err(StructureError::FastaEmpty));
}

#[test]
fn contigs_parse_good_examples() {
    let contigs = Contigs::parse("A1-100/0 50-70").expect("parses");
    assert_eq!(
        contigs.segments,
        vec![
            ContigSegment::Target {
                chain: "A".into(),
                start: 1,
                end: 100
            },
            ContigSegment::ChainBreak,
            ContigSegment::Designed { min: 50, max: 70 },
        ]
    );
    assert_eq!(contigs.designed_length(), (50, 70));
    assert_eq!(contigs.to_string(), "A1-100/0 50-70");
    let scaffold = Contigs::parse("B5-50/0 30 B60-100").expect("parses");
    assert_eq!(scaffold.designed_length(), (30, 30));
    assert_eq!(scaffold.to_string(), "B5-50/0 30 B60-100");
    assert_eq!(
        Contigs::parse("[A10-100/0 60]")
            .expect("brackets")
            .to_string(),
        "A10-100/0 60"
    );
    assert_eq!(
        Contigs::parse("20 30-40").expect("two").designed_length(),
        (50, 60)
    );
}

#[test]
fn contigs_refuse_bad_examples_with_the_exact_error() {
    let bad = |s: &str| ContigError::BadSegment { segment: s.into() };
    assert_eq!(Contigs::parse(""), Err(ContigError::Empty));
    assert_eq!(Contigs::parse(" / "), Err(ContigError::Empty));
    assert_eq!(Contigs::parse("A1-x/0 50"), Err(bad("A1-x")));
    assert_eq!(Contigs::parse("A1-100/0 5O"), Err(bad("5O")));
    assert_eq!(Contigs::parse("A1--5 20"), Err(bad("A1--5")));
    assert_eq!(
        Contigs::parse("A50-10/0 20"),
        Err(ContigError::ReversedRange {
            segment: "A50-10".into()
        })
    );
    assert_eq!(
        Contigs::parse("A1-10/0 70-50"),
        Err(ContigError::ReversedRange {
            segment: "70-50".into()
        })
    );
    assert_eq!(
        Contigs::parse("A1-10/0 300"),
        Err(ContigError::DesignedLength {
            segment: "300".into(),
            max: 250
        })
    );
    assert_eq!(Contigs::parse("A1-29"), Err(ContigError::NoDesignedSegment));
    assert_eq!(
        Contigs::parse("0 A1-29 20"),
        Err(ContigError::MisplacedChainBreak)
    );
    assert_eq!(
        Contigs::parse("A1-29/0/0 20"),
        Err(ContigError::MisplacedChainBreak)
    );
    assert_eq!(
        Contigs::parse(&"5 ".repeat(17)),
        Err(ContigError::TooManySegments { count: 17, max: 16 })
    );
    assert_eq!(
        Contigs::parse(&"1".repeat(201)),
        Err(ContigError::TooLong {
            length: 201,
            max: 200
        })
    );
}

#[test]
fn contigs_validate_against_the_debug_target() {
    let target = debug_target();
    assert_eq!(
        Contigs::parse("A1-29/0 20-30")
            .expect("ok")
            .validate(&target),
        Ok(())
    );
    assert_eq!(
        Contigs::parse("A5-10/0 20").expect("ok").validate(&target),
        Ok(())
    );
    let past_end = Contigs::parse("A1-30/0 20")
        .expect("parses")
        .validate(&target);
    assert_eq!(
        past_end,
        Err(ContigError::ResidueOutOfRange {
            chain: "A".into(),
            start: 1,
            end: 30,
            first: 1,
            last: 29
        })
    );
    assert_eq!(
        past_end.expect_err("error").to_string(),
        "residues A1-30 run past the chain's end (A1-29)"
    );
    let unknown = Contigs::parse("C1-10/0 20")
        .expect("parses")
        .validate(&target);
    assert_eq!(
        unknown,
        Err(ContigError::UnknownChain {
            chain: "C".into(),
            available: "A".into()
        })
    );
    assert_eq!(
        unknown.expect_err("error").to_string(),
        "chain C is not in the target (chains: A)"
    );
    let mut gapped = target.clone();
    gapped.chains[0].residues.retain(|r| r.number != 12);
    assert_eq!(
        Contigs::parse("A1-29/0 20")
            .expect("parses")
            .validate(&gapped),
        Err(ContigError::MissingResidue {
            chain: "A".into(),
            residue: 12
        })
    );
}

#[test]
fn hotspots_parse_and_must_lie_in_kept_segments() {
    let target = debug_target();
    let items: Vec<String> = ["A5", "a12", " A20 "]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let hotspots = parse_hotspots(&items).expect("parses");
    assert_eq!(
        hotspots[0],
        Hotspot {
            chain: "A".into(),
            residue: 5
        }
    );
    assert_eq!(hotspots[1].chain, "a");
    for bad in ["5A", "A", "AB5", "A-5", "A5.0", ""] {
        assert_eq!(
            parse_hotspots(&[bad.to_string()]),
            Err(ContigError::BadHotspot { text: bad.into() }),
            "{bad}"
        );
    }
    assert!(matches!(
        parse_hotspots(&vec!["A1".to_string(); 33]),
        Err(ContigError::TooManyHotspots { count: 33, max: 32 })
    ));

    let whole = Contigs::parse("A1-29/0 20").expect("parses");
    let part = Contigs::parse("A1-10/0 20").expect("parses");
    let a20 = parse_hotspots(&["A20".to_string()]).expect("parses");
    assert_eq!(validate_hotspots(&a20, &target, &whole), Ok(()));
    assert_eq!(
        validate_hotspots(&a20, &target, &part),
        Err(ContigError::HotspotOutsideContigs {
            hotspot: "A20".into(),
            kept: "A1-10".into()
        })
    );
    let a40 = parse_hotspots(&["A40".to_string()]).expect("parses");
    assert_eq!(
        validate_hotspots(&a40, &target, &whole),
        Err(ContigError::HotspotNotInTarget {
            chain: "A".into(),
            residue: 40
        })
    );
    let b3 = parse_hotspots(&["B3".to_string()]).expect("parses");
    assert!(matches!(
        validate_hotspots(&b3, &target, &whole),
        Err(ContigError::UnknownChain { .. })
    ));
}

#[test]
fn surface_hotspots_are_deterministic_exposed_and_valid() {
    let target = debug_target();
    let chosen = surface_hotspots(&target, "A", 3);
    assert_eq!(chosen.len(), 3);
    assert_eq!(chosen, surface_hotspots(&target, "A", 3));
    let contigs = Contigs::parse("A1-29/0 20").expect("parses");
    assert_eq!(validate_hotspots(&chosen, &target, &contigs), Ok(()));
    assert!(surface_hotspots(&target, "Z", 3).is_empty());
    assert!(surface_hotspots(&target, "A", 0).is_empty());
    assert_eq!(surface_hotspots(&target, "A", 100).len(), 29);
}

#[test]
fn only_the_first_model_is_read() {
    let model = |x: f64| {
        format!(
            "ATOM      1  N   GLY A   1    {x:8.3}   1.000   2.000  1.00 50.00           N\n\
             ATOM      2  CA  GLY A   1    {:8.3}   1.000   2.000  1.00 50.00           C\n",
            x + 1.458
        )
    };
    let text = format!(
        "MODEL        1\n{}ENDMDL\nMODEL        2\n{}ENDMDL\nEND\n",
        model(0.0),
        model(30.0)
    );
    let structure = Structure::from_pdb(&text).expect("parses");
    assert_eq!(structure.residue_count(), 1);
    let ca = structure.chains[0].alpha_carbons().next().expect("a CA");
    assert!((ca.position[0] - 1.458).abs() < 1e-6);
    assert_eq!(
        Structure::from_pdb(
            "ATOM      1  CA  GLY A   1       0.000   1.000   2.000  1.00 50.00  é\n"
        ),
        Err(StructureError::NotAscii { line: 1 })
    );
}

proptest! {
    #[test]
    fn pdb_parse_never_panics(lines in proptest::collection::vec(
        ("(ATOM  |HETATM|MODEL |ENDMDL|TER   |REMARK)", "[ -~]{0,80}"), 0..6,
    )) {
        let text: String = lines.iter().map(|(record, rest)| format!("{record}{rest}\n")).collect();
        let _ = Structure::from_pdb(&text);
    }

    #[test]
    fn pdb_parse_survives_corrupted_atom_lines(column in 0usize..80, byte in 32u8..127) {
        let mut lines: Vec<String> = DEBUG_TARGET_PDB.lines().take(12).map(str::to_string).collect();
        let line = &mut lines[3];
        if column < line.len() {
            line.replace_range(column..column + 1, &(byte as char).to_string());
        }
        let _ = Structure::from_pdb(&lines.join("\n"));
    }

    #[test]
    fn contig_parse_never_panics(text in "\\PC{0,220}") {
        let _ = Contigs::parse(&text);
    }

    #[test]
    fn contig_parse_of_contig_like_text_never_panics(text in "[A-C0-9 /\\-\\[\\]]{0,60}") {
        let _ = Contigs::parse(&text);
    }

    #[test]
    fn contig_display_round_trips(
        segments in proptest::collection::vec(
            prop_oneof![
                ("[A-Z]", 1i32..500, 0i32..100).prop_map(|(chain, start, extra)| {
                    ContigSegment::Target { chain, start, end: start + extra }
                }),
                (1u32..=250, 0u32..50).prop_map(|(min, extra)| ContigSegment::Designed {
                    min,
                    max: (min + extra).min(250),
                }),
            ],
            1..8,
        ),
        breaks in proptest::collection::vec(any::<bool>(), 8),
    ) {
        let mut with_breaks = Vec::new();
        for (index, segment) in segments.iter().enumerate() {
            if index > 0 && breaks[index] {
                with_breaks.push(ContigSegment::ChainBreak);
            }
            with_breaks.push(segment.clone());
        }
        with_breaks.push(ContigSegment::Designed { min: 10, max: 20 });
        let contigs = Contigs { segments: with_breaks };
        let text = contigs.to_string();
        prop_assert_eq!(Contigs::parse(&text), Ok(contigs));
    }
}
