//! PDB text to [`Structure`] and back, through `pdbtbx`.

use std::io::{BufReader, BufWriter};

use pdbtbx::{ErrorLevel, Format, PDBError, ReadOptions, StrictnessLevel};

use super::{Atom, Chain, MAX_ATOMS, MAX_PDB_BYTES, Residue, Structure, StructureError};

/// Error messages quote at most this much, so a hostile input is never echoed back at length.
const MAX_MESSAGE_CHARS: usize = 200;

pub(super) fn read_pdb(text: &str) -> Result<Structure, StructureError> {
    if text.len() > MAX_PDB_BYTES {
        return Err(StructureError::TooLarge {
            bytes: text.len(),
            limit: MAX_PDB_BYTES,
        });
    }
    // PDB is an ASCII format, and the parser slices lines by byte offsets.
    if let Some(line) = text.lines().position(|line| !line.is_ascii()) {
        return Err(StructureError::NotAscii { line: line + 1 });
    }
    // Counted over every model: cheap, and it bounds the parser's work, not just what is kept.
    let atom_records = text
        .lines()
        .filter(|line| line.starts_with("ATOM") || line.starts_with("HETATM"))
        .count();
    if atom_records > MAX_ATOMS {
        return Err(StructureError::TooManyAtoms {
            atoms: atom_records,
            limit: MAX_ATOMS,
        });
    }
    if atom_records == 0 {
        return Err(StructureError::Empty);
    }

    let input = parser_input(text)?;
    // Loose: predicted structures and hand-made files often skip records the standard wants.
    // pdbtbx 0.12 panics on some malformed input (`expect` in its parser); parser_input screens
    // the known cases, and this turns any other into an error rather than a crashed server.
    let read = std::panic::catch_unwind(|| {
        ReadOptions::new()
            .set_format(Format::Pdb)
            .set_level(StrictnessLevel::Loose)
            .set_only_first_model(true)
            .read_raw(BufReader::new(input.as_bytes()))
    })
    .map_err(|_| StructureError::Parse("the PDB parser failed on this input".to_string()))?;
    let (pdb, _warnings) = read.map_err(|errors| StructureError::Parse(describe(&errors)))?;
    let Some(model) = pdb.models().next() else {
        return Err(StructureError::Empty);
    };
    let mut chains = Vec::new();
    for chain in model.chains() {
        let mut residues = Vec::new();
        for residue in chain.residues() {
            // The first conformer: alternative locations beyond it are not used downstream.
            let Some(conformer) = residue.conformers().next() else {
                continue;
            };
            let atoms: Vec<Atom> = conformer
                .atoms()
                .map(|atom| Atom {
                    name: atom.name().to_string(),
                    element: atom
                        .element()
                        .map(|e| e.symbol().to_string())
                        .unwrap_or_default(),
                    position: [atom.x(), atom.y(), atom.z()],
                    b_factor: atom.b_factor(),
                })
                .collect();
            let all_hetero = conformer.atoms().all(|atom| atom.hetero());
            let has_ca = atoms.iter().any(|atom| atom.name == "CA");
            // Waters and ligands are not part of the chain; modified residues (MSE) have a CA.
            if atoms.is_empty() || (all_hetero && !has_ca) {
                continue;
            }
            let number = i32::try_from(residue.serial_number()).map_err(|_| {
                StructureError::Parse(format!(
                    "residue number {} is out of range",
                    residue.serial_number()
                ))
            })?;
            residues.push(Residue {
                number,
                insertion_code: residue.insertion_code().map(str::to_string),
                name: conformer.name().to_string(),
                atoms,
            });
        }
        if !residues.is_empty() {
            chains.push(Chain {
                id: chain.id().to_string(),
                residues,
            });
        }
    }
    let structure = Structure { chains };
    if structure.chains.is_empty() {
        return Err(StructureError::Empty);
    }
    if structure
        .chains
        .iter()
        .all(|chain| chain.alpha_carbons().next().is_none())
    {
        return Err(StructureError::NoAlphaCarbon);
    }
    Ok(structure)
}

/// Records the conversion uses; the rest (CRYST1, SEQRES, ...) are dropped before parsing.
const KEPT_RECORDS: [&str; 6] = ["ATOM", "HETATM", "MODEL", "ENDMDL", "TER", "END"];

/// The text handed to pdbtbx: only [`KEPT_RECORDS`], each atom record checked for what pdbtbx
/// 0.12 would otherwise panic on (a blank residue name, non-finite coordinates), since the text
/// comes from models and users.
fn parser_input(text: &str) -> Result<String, StructureError> {
    let mut input = String::with_capacity(text.len());
    for (index, line) in text.lines().enumerate() {
        let record = line.get(..6).unwrap_or(line).trim_end();
        if !KEPT_RECORDS.contains(&record) {
            continue;
        }
        if record == "ATOM" || record == "HETATM" {
            let bad = |reason: &'static str| StructureError::BadAtomRecord {
                line: index + 1,
                reason,
            };
            if line.len() < 54 {
                return Err(bad("it ends before the coordinates (columns 31-54)"));
            }
            if line[17..20].trim().is_empty() {
                return Err(bad("its residue name (columns 18-20) is blank"));
            }
            let finite = |columns: std::ops::Range<usize>| {
                let field = line.get(columns).map_or("", str::trim);
                field.is_empty() || field.parse::<f64>().is_ok_and(f64::is_finite)
            };
            if !(finite(30..38) && finite(38..46) && finite(46..54)) {
                return Err(bad("a coordinate (columns 31-54) is not a finite number"));
            }
            if !(finite(54..60) && finite(60..66)) {
                return Err(bad(
                    "its occupancy or B-factor (columns 55-66) is not a finite number",
                ));
            }
        }
        input.push_str(line);
        input.push('\n');
    }
    Ok(input)
}

/// The most severe of the parser's errors, short and without the offending line.
fn describe(errors: &[PDBError]) -> String {
    let worst = errors
        .iter()
        .find(|e| {
            matches!(
                e.level(),
                ErrorLevel::BreakingError | ErrorLevel::InvalidatingError
            )
        })
        .or_else(|| errors.first());
    let message = match worst {
        Some(error) => format!(
            "{} ({}): {}",
            error.short_description(),
            error.level(),
            error.long_description()
        ),
        None => "the parser gave no reason".to_string(),
    };
    message.chars().take(MAX_MESSAGE_CHARS).collect()
}

pub(super) fn write_pdb(structure: &Structure) -> String {
    let mut pdb = pdbtbx::PDB::new();
    let mut model = pdbtbx::Model::new(1);
    let mut serial = 0usize;
    for chain in &structure.chains {
        // A PDB chain identifier is one character; pdbtbx writes the last one of a longer id.
        let Some(mut out_chain) = pdbtbx::Chain::new(printable(&chain.id, 4, "A")) else {
            continue;
        };
        for residue in &chain.residues {
            let name = printable(&residue.name, 3, "UNK");
            let Some(mut conformer) = pdbtbx::Conformer::new(&name, None, None) else {
                continue;
            };
            for atom in &residue.atoms {
                serial += 1;
                let [x, y, z] = atom.position.map(fits_coordinate_column);
                // The columns hold 0 to 999.99; pdbtbx refuses non-finite values, which skips them.
                let b_factor = atom.b_factor.clamp(0.0, 999.99);
                if let Some(out_atom) = pdbtbx::Atom::new(
                    false,
                    serial,
                    printable(&atom.name, 4, "X"),
                    x,
                    y,
                    z,
                    1.0,
                    b_factor,
                    printable(&atom.element, 2, ""),
                    0,
                ) {
                    conformer.add_atom(out_atom);
                }
            }
            let insertion = residue
                .insertion_code
                .as_deref()
                .map(|code| printable(code, 1, ""))
                .filter(|code| !code.is_empty());
            let residue_out = pdbtbx::Residue::new(
                residue.number as isize,
                insertion.as_deref(),
                Some(conformer),
            )
            .or_else(|| pdbtbx::Residue::new(residue.number as isize, None, None));
            if let Some(residue_out) = residue_out {
                out_chain.add_residue(residue_out);
            }
        }
        model.add_chain(out_chain);
    }
    pdb.add_model(model);
    let mut bytes = Vec::new();
    // Writing into memory cannot fail; the writer flushes when save_pdb_raw drops it.
    pdbtbx::save_pdb_raw(&pdb, BufWriter::new(&mut bytes), StrictnessLevel::Loose);
    standard_columns(&String::from_utf8_lossy(&bytes))
}

/// pdbtbx 0.12 writes integer fields and atom names left-aligned (`ATOM  1     CA   GLY A1`);
/// the PDB standard right-aligns serials and residue numbers and starts one-letter-element atom
/// names in column 14 and elements in column 78, and column-reading tools (viewers, the models' own parsers) expect that.
/// This moves those fields into their standard columns and rewrites TER to match.
fn standard_columns(written: &str) -> String {
    let mut text = String::with_capacity(written.len() + written.len() / 8);
    let mut last_atom: Option<String> = None;
    for line in written.lines() {
        let is_atom = line.starts_with("ATOM") || line.starts_with("HETATM");
        match (is_atom, line.get(..27), line.get(27..)) {
            (true, Some(head), Some(tail)) => {
                let serial = head[6..11].trim();
                let name = head[12..16].trim();
                let element = line.get(76..78).map_or("", str::trim);
                let name = if name.len() < 4 && element.len() <= 1 {
                    format!(" {name:<3}")
                } else {
                    format!("{name:<4}")
                };
                // The element is right-aligned in columns 77-78.
                let tail = match (tail.get(..49), tail.get(51..)) {
                    (Some(coordinates), Some(charge)) => {
                        format!("{coordinates}{element:>2}{}", charge.trim_end())
                    }
                    _ => tail.to_string(),
                };
                let fixed = format!(
                    "{}{serial:>5} {name}{}{:>4}{}{tail}",
                    &head[..6],
                    &head[16..22],
                    head[22..26].trim(),
                    &head[26..27],
                );
                text.push_str(&fixed);
                last_atom = Some(fixed);
            }
            _ if line.starts_with("TER") => {
                if let Some(atom) = last_atom.as_deref().and_then(|a| a.get(..27)) {
                    let serial = atom[6..11].trim().parse::<usize>().map_or(0, |s| s + 1);
                    text.push_str(&format!(
                        "TER   {serial:>5}      {}",
                        atom[17..27].trim_end()
                    ));
                } else {
                    continue;
                }
            }
            _ => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

/// The text as a PDB column can hold it: printable ASCII only (pdbtbx slices by bytes), at most
/// `width` characters, `fallback` when nothing is left.
fn printable(text: &str, width: usize, fallback: &str) -> String {
    let kept: String = text
        .trim()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(width)
        .collect();
    if kept.is_empty() {
        fallback.to_string()
    } else {
        kept
    }
}

/// A coordinate within what the 8-character `%8.3f` column can print; out-of-range values would
/// otherwise lose their leading digits silently.
fn fits_coordinate_column(value: f64) -> f64 {
    value.clamp(-999.999, 9999.999)
}
