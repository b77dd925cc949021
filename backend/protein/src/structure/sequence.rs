//! The amino-acid alphabet, sequence validation and FASTA.

use super::StructureError;

/// The 20 standard amino acids' one-letter codes, alphabetically.
pub const STANDARD_AMINO_ACIDS: &str = "ACDEFGHIKLMNPQRSTVWY";

/// FASTA sequence lines are wrapped at this width, as most tools write them.
const FASTA_LINE_WIDTH: usize = 80;

const THREE_LETTER: [(char, &str); 20] = [
    ('A', "ALA"),
    ('C', "CYS"),
    ('D', "ASP"),
    ('E', "GLU"),
    ('F', "PHE"),
    ('G', "GLY"),
    ('H', "HIS"),
    ('I', "ILE"),
    ('K', "LYS"),
    ('L', "LEU"),
    ('M', "MET"),
    ('N', "ASN"),
    ('P', "PRO"),
    ('Q', "GLN"),
    ('R', "ARG"),
    ('S', "SER"),
    ('T', "THR"),
    ('V', "VAL"),
    ('W', "TRP"),
    ('Y', "TYR"),
];

/// A residue name's one-letter code: the 20 standard ones (any case), selenomethionine (`MSE`,
/// common in crystal structures) as `M`, `X` for anything else.
pub fn one_letter(three: &str) -> char {
    let upper = three.trim().to_ascii_uppercase();
    if upper == "MSE" {
        return 'M';
    }
    THREE_LETTER
        .iter()
        .find(|(_, name)| *name == upper)
        .map_or('X', |(code, _)| *code)
}

/// A one-letter code's residue name, for the 20 standard amino acids (uppercase only).
pub fn three_letter(one: char) -> Option<&'static str> {
    THREE_LETTER
        .iter()
        .find(|(code, _)| *code == one)
        .map(|(_, name)| *name)
}

/// Checks a sequence holds 1 to `max_len` residues, each one of the 20 uppercase standard codes.
pub fn validate_sequence(seq: &str, max_len: usize) -> Result<(), StructureError> {
    if seq.is_empty() {
        return Err(StructureError::EmptySequence);
    }
    if let Some((index, letter)) = seq
        .chars()
        .enumerate()
        .find(|(_, c)| !STANDARD_AMINO_ACIDS.contains(*c))
    {
        return Err(StructureError::InvalidResidue {
            position: index + 1,
            letter,
        });
    }
    // Every character is ASCII by now, so the byte length is the residue count.
    if seq.len() > max_len {
        return Err(StructureError::SequenceTooLong {
            length: seq.len(),
            max: max_len,
        });
    }
    Ok(())
}

/// One FASTA record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastaRecord {
    /// The header line without its `>`.
    pub header: String,
    /// The sequence, lines joined, whitespace removed.
    pub sequence: String,
}

/// Reads FASTA: `>` header lines, each followed by one or more sequence lines; blank lines are
/// skipped. Sequence before the first header, a record without sequence, or no records at all are
/// errors. Letters are not checked here: see [`validate_sequence`].
pub fn parse_fasta(text: &str) -> Result<Vec<FastaRecord>, StructureError> {
    let mut records: Vec<FastaRecord> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(header) = line.strip_prefix('>') {
            if let Some(last) = records.last() {
                check_has_sequence(last)?;
            }
            records.push(FastaRecord {
                header: header.trim().to_string(),
                sequence: String::new(),
            });
            continue;
        }
        let Some(record) = records.last_mut() else {
            return Err(StructureError::FastaSequenceBeforeHeader { line: index + 1 });
        };
        record
            .sequence
            .extend(line.chars().filter(|c| !c.is_whitespace()));
    }
    match records.last() {
        None => Err(StructureError::FastaEmpty),
        Some(last) => {
            check_has_sequence(last)?;
            Ok(records)
        }
    }
}

fn check_has_sequence(record: &FastaRecord) -> Result<(), StructureError> {
    if record.sequence.is_empty() {
        Err(StructureError::FastaEmptySequence {
            header: record.header.chars().take(80).collect(),
        })
    } else {
        Ok(())
    }
}

/// Writes FASTA with sequence lines of at most 80 characters.
pub fn write_fasta(records: &[FastaRecord]) -> String {
    let mut text = String::new();
    for record in records {
        text.push('>');
        text.push_str(&record.header);
        text.push('\n');
        let letters: Vec<char> = record.sequence.chars().collect();
        for line in letters.chunks(FASTA_LINE_WIDTH) {
            text.extend(line);
            text.push('\n');
        }
    }
    text
}
