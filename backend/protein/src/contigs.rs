//! RFdiffusion's contig and hotspot language, parsed and checked against the target before any
//! call, so a model's mistake comes back as words it can act on rather than a failed job.
//!
//! A binder design's contigs read like `A1-100/0 50-70`: segments separated by spaces and/or `/`;
//! `A1-100` keeps the target's chain A residues 1 to 100, `50-70` (or `60`) is a new designed
//! segment of that many residues, and `0` is a chain break. Hotspots read like `A50`: a chain
//! letter and a residue number the binder should touch.

use std::collections::BTreeSet;
use std::fmt;

use crate::structure::Structure;

/// The longest contig text accepted, in characters.
pub const MAX_CONTIG_CHARS: usize = 200;
/// The most segments (kept, designed and breaks together) a contig may have.
pub const MAX_SEGMENTS: usize = 16;
/// The longest designed segment, in residues.
pub const MAX_DESIGNED: u32 = 250;
/// The most hotspots accepted.
pub const MAX_HOTSPOTS: usize = 32;

/// Errors quote at most this much of the model's text.
const MAX_QUOTE_CHARS: usize = 24;
/// Residues with CAs this close count as neighbours when judging how buried a residue is.
const NEIGHBOUR_RADIUS: f64 = 10.0;
/// Hotspots on one face lie within this distance of the most exposed residue.
const FACE_RADIUS: f64 = 12.0;

/// One segment of a contig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContigSegment {
    /// Target residues `start..=end` of `chain`, kept as they are.
    Target { chain: String, start: i32, end: i32 },
    /// A new segment of `min..=max` residues the model designs.
    Designed { min: u32, max: u32 },
    /// The end of one chain and the start of the next.
    ChainBreak,
}

/// A parsed contig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contigs {
    /// Its segments, in order.
    pub segments: Vec<ContigSegment>,
}

/// A residue of the target the binder should touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hotspot {
    /// The target chain.
    pub chain: String,
    /// The residue's number in the target.
    pub residue: i32,
}

impl fmt::Display for Hotspot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.chain, self.residue)
    }
}

/// What is wrong with a contig or hotspot list, worded for the model that wrote it.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ContigError {
    #[error("the contig is empty; write e.g. \"A1-100/0 50-70\"")]
    Empty,
    #[error("the contig is {length} characters long; at most {max} are allowed")]
    TooLong { length: usize, max: usize },
    #[error("the contig has {count} segments; at most {max} are allowed")]
    TooManySegments { count: usize, max: usize },
    #[error(
        "segment '{segment}' is not a contig segment: write A10-50 to keep target residues, 60 or 50-70 for a designed segment, 0 for a chain break"
    )]
    BadSegment { segment: String },
    #[error("segment '{segment}' runs backwards: its first number must not exceed its second")]
    ReversedRange { segment: String },
    #[error("designed segment '{segment}' must be 1 to {max} residues long")]
    DesignedLength { segment: String, max: u32 },
    #[error("the contig has no designed segment (such as 50-70), so there is no binder to design")]
    NoDesignedSegment,
    #[error(
        "a chain break (0) must sit between two segments, not at the start, end or next to another break"
    )]
    MisplacedChainBreak,
    #[error("chain {chain} is not in the target (chains: {available})")]
    UnknownChain { chain: String, available: String },
    #[error("residues {chain}{start}-{end} run past the chain's end ({chain}{first}-{last})")]
    ResidueOutOfRange {
        chain: String,
        start: i32,
        end: i32,
        first: i32,
        last: i32,
    },
    #[error("residue {chain}{residue} is not in the target (chain {chain} has a gap there)")]
    MissingResidue { chain: String, residue: i32 },
    #[error("{count} hotspots were given; at most {max} are allowed")]
    TooManyHotspots { count: usize, max: usize },
    #[error("hotspot '{text}' is not a chain letter followed by a residue number, such as A50")]
    BadHotspot { text: String },
    #[error("hotspot {chain}{residue} is not a residue of the target")]
    HotspotNotInTarget { chain: String, residue: i32 },
    #[error("hotspot {hotspot} is not among the target residues the contig keeps ({kept})")]
    HotspotOutsideContigs { hotspot: String, kept: String },
}

impl Contigs {
    /// Parses contig text. Limits: at most [`MAX_CONTIG_CHARS`] characters and [`MAX_SEGMENTS`]
    /// segments, designed lengths 1 to [`MAX_DESIGNED`], ranges not reversed, breaks between
    /// segments, and at least one designed segment. Surrounding `[ ]` are accepted.
    pub fn parse(text: &str) -> Result<Self, ContigError> {
        let length = text.chars().count();
        if length > MAX_CONTIG_CHARS {
            return Err(ContigError::TooLong {
                length,
                max: MAX_CONTIG_CHARS,
            });
        }
        let trimmed = text.trim();
        let inner = trimmed
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(trimmed);
        let tokens: Vec<&str> = inner
            .split(|c: char| c.is_whitespace() || c == '/')
            .filter(|t| !t.is_empty())
            .collect();
        if tokens.is_empty() {
            return Err(ContigError::Empty);
        }
        if tokens.len() > MAX_SEGMENTS {
            return Err(ContigError::TooManySegments {
                count: tokens.len(),
                max: MAX_SEGMENTS,
            });
        }
        let segments = tokens
            .iter()
            .map(|token| parse_segment(token))
            .collect::<Result<Vec<_>, _>>()?;
        let breaks_misplaced = segments.first() == Some(&ContigSegment::ChainBreak)
            || segments.last() == Some(&ContigSegment::ChainBreak)
            || segments
                .windows(2)
                .any(|w| w[0] == ContigSegment::ChainBreak && w[1] == ContigSegment::ChainBreak);
        if breaks_misplaced {
            return Err(ContigError::MisplacedChainBreak);
        }
        if !segments
            .iter()
            .any(|s| matches!(s, ContigSegment::Designed { .. }))
        {
            return Err(ContigError::NoDesignedSegment);
        }
        Ok(Contigs { segments })
    }

    /// Checks every kept segment's chain is in the target and holds every residue it names.
    pub fn validate(&self, target: &Structure) -> Result<(), ContigError> {
        for segment in &self.segments {
            if let ContigSegment::Target { chain, start, end } = segment {
                let numbers = residue_numbers(target, chain)?;
                let (Some(&first), Some(&last)) = (numbers.first(), numbers.last()) else {
                    return Err(unknown_chain(target, chain));
                };
                if *start < first || *end > last {
                    return Err(ContigError::ResidueOutOfRange {
                        chain: chain.clone(),
                        start: *start,
                        end: *end,
                        first,
                        last,
                    });
                }
                // Counting the range, not walking it: a range may span millions of numbers.
                let present = numbers.range(*start..=*end).count() as i64;
                if present != i64::from(*end) - i64::from(*start) + 1 {
                    let missing = (*start..=*end)
                        .find(|n| !numbers.contains(n))
                        .unwrap_or(*start);
                    return Err(ContigError::MissingResidue {
                        chain: chain.clone(),
                        residue: missing,
                    });
                }
            }
        }
        Ok(())
    }

    /// The least and most designed residues the contig allows, over all designed segments.
    pub fn designed_length(&self) -> (u32, u32) {
        self.segments
            .iter()
            .fold((0, 0), |(low, high), segment| match segment {
                ContigSegment::Designed { min, max } => (low + min, high + max),
                _ => (low, high),
            })
    }

    /// The kept target segments, written as the contig writes them (`A1-29, B5-50`).
    fn kept_description(&self) -> String {
        let kept: Vec<String> = self
            .segments
            .iter()
            .filter_map(|s| match s {
                ContigSegment::Target { chain, start, end } => {
                    Some(format!("{chain}{start}-{end}"))
                }
                _ => None,
            })
            .collect();
        if kept.is_empty() {
            "none".to_string()
        } else {
            kept.join(", ")
        }
    }
}

impl fmt::Display for Contigs {
    /// The canonical text: `A1-100/0 50-70`, a break written `/0` after the segment it ends.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, segment) in self.segments.iter().enumerate() {
            if index > 0 {
                let separator = if *segment == ContigSegment::ChainBreak {
                    "/"
                } else {
                    " "
                };
                f.write_str(separator)?;
            }
            match segment {
                ContigSegment::Target { chain, start, end } => write!(f, "{chain}{start}-{end}")?,
                ContigSegment::Designed { min, max } if min == max => write!(f, "{min}")?,
                ContigSegment::Designed { min, max } => write!(f, "{min}-{max}")?,
                ContigSegment::ChainBreak => f.write_str("0")?,
            }
        }
        Ok(())
    }
}

fn parse_segment(token: &str) -> Result<ContigSegment, ContigError> {
    let quoted = || quote(token);
    let bad = || ContigError::BadSegment { segment: quoted() };
    let first = token.chars().next().ok_or_else(bad)?;
    let (chain, numbers) = if first.is_ascii_alphabetic() {
        (Some(first.to_string()), &token[first.len_utf8()..])
    } else {
        (None, token)
    };
    let (low_text, high_text) = numbers.split_once('-').unwrap_or((numbers, numbers));
    let is_number = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    if !is_number(low_text) || !is_number(high_text) {
        return Err(bad());
    }
    let (Ok(low), Ok(high)) = (low_text.parse::<u32>(), high_text.parse::<u32>()) else {
        return Err(bad());
    };
    if low > high {
        return Err(ContigError::ReversedRange { segment: quoted() });
    }
    match chain {
        Some(chain) => {
            let (Ok(start), Ok(end)) = (i32::try_from(low), i32::try_from(high)) else {
                return Err(bad());
            };
            Ok(ContigSegment::Target { chain, start, end })
        }
        None if token == "0" => Ok(ContigSegment::ChainBreak),
        None if low == 0 || high > MAX_DESIGNED => Err(ContigError::DesignedLength {
            segment: quoted(),
            max: MAX_DESIGNED,
        }),
        None => Ok(ContigSegment::Designed {
            min: low,
            max: high,
        }),
    }
}

/// Parses hotspots such as `A50` (a chain letter, then a residue number); at most
/// [`MAX_HOTSPOTS`].
pub fn parse_hotspots(items: &[String]) -> Result<Vec<Hotspot>, ContigError> {
    if items.len() > MAX_HOTSPOTS {
        return Err(ContigError::TooManyHotspots {
            count: items.len(),
            max: MAX_HOTSPOTS,
        });
    }
    items
        .iter()
        .map(|item| {
            let text = item.trim();
            let bad = || ContigError::BadHotspot { text: quote(text) };
            let mut chars = text.chars();
            let chain = chars
                .next()
                .filter(char::is_ascii_alphabetic)
                .ok_or_else(bad)?;
            let digits = chars.as_str();
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let residue = digits.parse::<i32>().map_err(|_| bad())?;
            Ok(Hotspot {
                chain: chain.to_string(),
                residue,
            })
        })
        .collect()
}

/// Checks each hotspot is a residue of the target and lies inside a kept segment of the contig.
pub fn validate_hotspots(
    hotspots: &[Hotspot],
    target: &Structure,
    contigs: &Contigs,
) -> Result<(), ContigError> {
    for hotspot in hotspots {
        let numbers = residue_numbers(target, &hotspot.chain)?;
        if !numbers.contains(&hotspot.residue) {
            return Err(ContigError::HotspotNotInTarget {
                chain: hotspot.chain.clone(),
                residue: hotspot.residue,
            });
        }
        let kept = contigs.segments.iter().any(|segment| {
            matches!(segment, ContigSegment::Target { chain, start, end }
                if *chain == hotspot.chain && (*start..=*end).contains(&hotspot.residue))
        });
        if !kept {
            return Err(ContigError::HotspotOutsideContigs {
                hotspot: hotspot.to_string(),
                kept: contigs.kept_description(),
            });
        }
    }
    Ok(())
}

/// A scripted plan's hotspots: `count` residues of one face of `chain`. Each residue's appeal is
/// its exposure (fewer CA neighbours within 10 Å) plus a bonus for hydrophobic side chains
/// (AILMFVWY, the residues binders bury); the most appealing residue anchors the face, and the
/// rest are the most appealing residues within 12 Å of it whose outward direction (from the
/// chain's centroid) agrees with the anchor's. Ties go to the earlier residue; the result is in
/// chain order. Empty when the chain is unknown or has no CAs.
pub fn surface_hotspots(target: &Structure, chain: &str, count: usize) -> Vec<Hotspot> {
    let Some(chain_ref) = target.chain(chain) else {
        return Vec::new();
    };
    let residues: Vec<(i32, [f64; 3], bool)> = chain_ref
        .residues
        .iter()
        .filter_map(|r| {
            let ca = r.atom("CA")?.position;
            let hydrophobic = "AILMFVWY".contains(crate::structure::one_letter(&r.name));
            Some((r.number, ca, hydrophobic))
        })
        .collect();
    if residues.is_empty() || count == 0 {
        return Vec::new();
    }
    let centroid = centroid(residues.iter().map(|r| r.1));
    let neighbours: Vec<usize> = residues
        .iter()
        .map(|a| {
            residues
                .iter()
                .filter(|b| distance(a.1, b.1) <= NEIGHBOUR_RADIUS)
                .count()
                - 1
        })
        .collect();
    let most_neighbours = neighbours.iter().copied().max().unwrap_or(0);
    let appeal: Vec<f64> = residues
        .iter()
        .zip(&neighbours)
        .map(|(r, n)| (most_neighbours - n) as f64 + if r.2 { 3.0 } else { 0.0 })
        .collect();
    let by_appeal = |a: &usize, b: &usize| appeal[*b].total_cmp(&appeal[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..residues.len()).collect();
    order.sort_by(by_appeal);
    let anchor = order[0];
    let outward = |i: usize| sub(residues[i].1, centroid);
    let same_face = |i: usize| {
        distance(residues[i].1, residues[anchor].1) <= FACE_RADIUS
            && dot(outward(i), outward(anchor)) > 0.0
    };
    let mut chosen: Vec<usize> = order.iter().copied().filter(|&i| same_face(i)).collect();
    // A small or flat chain may not have enough on one face; the next most appealing fill in.
    chosen.extend(order.iter().copied().filter(|&i| !same_face(i)));
    chosen.truncate(count);
    chosen.sort_unstable();
    chosen
        .into_iter()
        .map(|i| Hotspot {
            chain: chain.to_string(),
            residue: residues[i].0,
        })
        .collect()
}

fn residue_numbers(target: &Structure, chain: &str) -> Result<BTreeSet<i32>, ContigError> {
    let chain_ref = target
        .chain(chain)
        .ok_or_else(|| unknown_chain(target, chain))?;
    Ok(chain_ref.residues.iter().map(|r| r.number).collect())
}

fn unknown_chain(target: &Structure, chain: &str) -> ContigError {
    let ids: Vec<&str> = target.chains.iter().map(|c| c.id.as_str()).collect();
    ContigError::UnknownChain {
        chain: quote(chain),
        available: ids.join(", "),
    }
}

fn quote(text: &str) -> String {
    text.chars().take(MAX_QUOTE_CHARS).collect()
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    let d = sub(a, b);
    dot(d, d).sqrt()
}

fn centroid(points: impl Iterator<Item = [f64; 3]>) -> [f64; 3] {
    let (sum, n) = points.fold(([0.0; 3], 0usize), |(s, n), p| {
        ([s[0] + p[0], s[1] + p[1], s[2] + p[2]], n + 1)
    });
    let n = n.max(1) as f64;
    sum.map(|x| x / n)
}
