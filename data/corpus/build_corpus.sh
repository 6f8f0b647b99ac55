#!/usr/bin/env bash
# Build the multilingual text corpus of shared/CORPUS.md offline from Debian
# packages (+ npm chinese-poetry@2.0.1).
#
#   data/corpus/build_corpus.sh [--cache DIR] [--jobs N] [--quick] [--force]
#
# Output: DIR/corpus/text/<group>.<lang>.txt, DIR/corpus/manifest.json, DIR/corpus/DONE
# (--quick: a tiny smoke-test corpus under DIR/corpus-quick/ instead).
# See data/corpus/README.md for the format and the cache layout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=/usr/bin/python3
CACHE="${PAGEGRAM_CACHE:-$HOME/.cache/pagegram}"
JOBS="$(nproc 2>/dev/null || echo 2)"
QUICK=0
FORCE=0

usage() { echo "usage: $0 [--cache DIR] [--jobs N] [--quick] [--force]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) [ $# -ge 2 ] || usage; CACHE="$2"; shift 2 ;;
    --cache=*) CACHE="${1#--cache=}"; shift ;;
    --jobs) [ $# -ge 2 ] || usage; JOBS="$2"; shift 2 ;;
    --jobs=*) JOBS="${1#--jobs=}"; shift ;;
    --quick) QUICK=1; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage ;;
    *) echo "build_corpus: unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "build_corpus: --jobs must be a positive integer" >&2; exit 2; }

if [ "$QUICK" = 1 ]; then ROOT="$CACHE/corpus-quick"; QFLAG=--quick; else ROOT="$CACHE/corpus"; QFLAG=; fi
mkdir -p "$ROOT"
ROOT="$(cd "$ROOT" && pwd)"
DL="$ROOT/downloads"; UNP="$ROOT/unpacked"; MARK="$ROOT/markers"
mkdir -p "$DL" "$UNP" "$MARK"

T0=$(date +%s)
log() { echo "[corpus $(( $(date +%s) - T0 ))s] $*" >&2; }
die() { echo "build_corpus: FAILED: $*" >&2; exit 1; }

# Stamp of the recipe: the helper scripts + mode. DONE holds it; equal stamp = nothing to do.
STAMP="$(cat "$HERE"/build_corpus.sh "$HERE"/*.py | sha256sum | cut -c1-16)-q$QUICK"
if [ "$FORCE" = 0 ] && [ -f "$ROOT/DONE" ] && [ "$(cat "$ROOT/DONE")" = "$STAMP" ] && [ -f "$ROOT/manifest.json" ]; then
  log "corpus up to date in $ROOT (DONE stamp $STAMP); nothing to do"
  exit 0
fi
rm -f "$ROOT/DONE"

# ---------------------------------------------------------------- tools ----
need_pkgs=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }
have_cmd apt-get || die "apt-get not found (Debian/Ubuntu needed)"
have_cmd dpkg-deb || die "dpkg-deb not found"
have_cmd groff || need_pkgs+=(groff-base)
have_cmd xz || need_pkgs+=(xz-utils)
if [ "$QUICK" = 0 ]; then
  have_cmd pdftotext || need_pkgs+=(poppler-utils)
  have_pkg poppler-data || need_pkgs+=(poppler-data)
  have_cmd lz4cat || need_pkgs+=(lz4)
  have_cmd pod2text || need_pkgs+=(perl)
  have_cmd iconv || need_pkgs+=(libc-bin)
  have_cmd npm || need_pkgs+=(npm)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "tools: installing ${need_pkgs[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >"$ROOT/apt-install.log" 2>&1; then
    apt-get update >>"$ROOT/apt-install.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >>"$ROOT/apt-install.log" 2>&1 \
      || die "could not install extraction tools (${need_pkgs[*]}); see $ROOT/apt-install.log"
  fi
fi
[ -x "$PY" ] || die "$PY not found"

# ------------------------------------------------------------- download ----
S_DL=$(date +%s)
mapfile -t PKGLINES < <("$PY" "$HERE/sources.py" packages $QFLAG)
mapfile -t NPMS < <("$PY" "$HERE/sources.py" npm $QFLAG)
declare -A CORE=()
ALL_PKGS=()
for l in "${PKGLINES[@]}"; do p="${l%% *}"; ALL_PKGS+=("$p"); if [ "${l##* }" = core ]; then CORE[$p]=1; fi; done
FAILED_PKGS=()
fail_pkg() {  # pkg, message
  if [ -n "${CORE[$1]:-}" ]; then die "core package $1: $2"; fi
  echo "build_corpus: warning: optional package $1 skipped: $2" >&2
  FAILED_PKGS+=("$1")
}
deb_of() { compgen -G "$DL/${1}_*.deb" | head -n1 || true; }

missing=()
for p in "${ALL_PKGS[@]}"; do [ -n "$(deb_of "$p")" ] || missing+=("$p"); done
log "download: ${#ALL_PKGS[@]} packages, ${#missing[@]} to fetch"
if [ ${#missing[@]} -gt 0 ]; then
  # apt needs package lists; fetch the system's once if it knows no candidate
  pol="$(apt-cache policy "${missing[0]}" 2>/dev/null || true)"
  if [[ "$pol" != *"Candidate: "[0-9]* ]]; then
    log "download: apt lists have no candidate for ${missing[0]}; running apt-get update"
    apt-get update >"$ROOT/apt-update.log" 2>&1 || log "warning: apt-get update failed (see $ROOT/apt-update.log)"
  fi
  PART="$DL/.partial"; rm -rf "$PART"; mkdir -p "$PART"
  if ! (cd "$PART" && apt-get download -o APT::Sandbox::User=root "${missing[@]}" >"$ROOT/download.log" 2>&1); then
    log "download: batch failed; fetching one by one"
    for p in "${missing[@]}"; do
      compgen -G "$PART/${p}_*.deb" >/dev/null && continue
      (cd "$PART" && apt-get download -o APT::Sandbox::User=root "$p" >>"$ROOT/download.log" 2>&1) \
        || { rm -f "$PART/${p}_"*.deb; fail_pkg "$p" "apt-get download failed (see $ROOT/download.log)"; }
    done
  fi
  for f in "$PART"/*.deb; do if [ -e "$f" ]; then mv -f "$f" "$DL/"; fi; done
  rm -rf "$PART"
fi
for p in "${ALL_PKGS[@]}"; do
  [ -n "$(deb_of "$p")" ] || { [[ " ${FAILED_PKGS[*]:-} " == *" $p "* ]] || fail_pkg "$p" "no .deb after download"; }
done

# npm packages: npm pack into downloads/
for spec in "${NPMS[@]}"; do
  name="${spec%@*}"; ver="${spec##*@}"; tgz="$DL/${name}-${ver}.tgz"
  [ -s "$tgz" ] && continue
  log "download: npm pack $spec"
  PART="$DL/.npm-partial"; rm -rf "$PART"; mkdir -p "$PART"
  (cd "$PART" && npm pack --silent "$spec" >"$ROOT/npm.log" 2>&1) && [ -s "$PART/${name}-${ver}.tgz" ] \
    || die "core npm package $spec: npm pack failed (see $ROOT/npm.log)"
  mv -f "$PART/${name}-${ver}.tgz" "$tgz"; rm -rf "$PART"
done

# apt Translation-xx files (package descriptions) into a private lists dir
if [ "$QUICK" = 0 ] && [ ! -f "$MARK/translations.done" ]; then
  log "download: apt Translation-{en,de,ja,ru,zh_CN,zh_TW} (private lists dir)"
  APTD="$ROOT/apt"; rm -rf "$APTD"; mkdir -p "$APTD/lists/partial" "$APTD/sources"
  CODENAME="$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-bookworm}")"
  URI="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | grep -v security | head -n1 | awk '{print $2}')"
  [ -n "$URI" ] || URI="$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | grep -v security | grep debian | head -n1 | sed 's/\[[^]]*\]//' | awk '{print $2}')"
  [ -n "$URI" ] || URI=http://deb.debian.org/debian
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nLanguages: en de ja ru zh_CN zh_TW\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$URI" "$CODENAME" >"$APTD/sources/corpus.sources"
  apt-get update -o Dir::State::Lists="$APTD/lists" -o Dir::Etc::sourcelist=/dev/null \
      -o Dir::Etc::sourceparts="$APTD/sources" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
      -o Acquire::Languages::=en -o APT::Sandbox::User=root >"$ROOT/apt-translations.log" 2>&1 \
    || die "core source descriptions: private apt-get update failed (see $ROOT/apt-translations.log)"
  compgen -G "$APTD/lists/*Translation-en*" >/dev/null || die "core source descriptions: no Translation-en fetched"
  touch "$MARK/translations.done"
fi
S_DL=$(( $(date +%s) - S_DL ))
log "download: done in ${S_DL}s ($(du -sh "$DL" | cut -f1) in downloads/)"

# --------------------------------------------------------------- unpack ----
S_UN=$(date +%s)
todo=()
for p in "${ALL_PKGS[@]}"; do
  [ -f "$MARK/unpack.$p" ] && continue
  [ -n "$(deb_of "$p")" ] || continue
  todo+=("$p")
done
log "unpack: ${#ALL_PKGS[@]} packages, ${#todo[@]} to unpack (jobs $JOBS)"
unpack_one() {  # runs in a subshell via xargs
  p="$1"; deb="$(compgen -G "$DL/${p}_*.deb" | head -n1)"
  rm -rf "$UNP/$p" "$UNP/$p.tmp"; mkdir -p "$UNP/$p.tmp"
  dpkg-deb -x "$deb" "$UNP/$p.tmp" || { rm -rf "$UNP/$p.tmp"; echo "unpack failed: $p" >&2; return 1; }
  mv "$UNP/$p.tmp" "$UNP/$p" && touch "$MARK/unpack.$p"
}
export -f unpack_one; export DL UNP MARK
if [ ${#todo[@]} -gt 0 ]; then
  printf '%s\n' "${todo[@]}" | xargs -P "$JOBS" -I{} bash -c 'unpack_one "$@"' _ {} || true
fi
for p in "${todo[@]}"; do [ -f "$MARK/unpack.$p" ] || fail_pkg "$p" "dpkg-deb -x failed"; done

# npm tarballs
for spec in "${NPMS[@]}"; do
  name="${spec%@*}"; ver="${spec##*@}"
  [ -f "$MARK/unpack.npm.$name" ] && continue
  rm -rf "$UNP/npm-$name" "$UNP/npm-$name.tmp"; mkdir -p "$UNP/npm-$name.tmp"
  tar -xzf "$DL/${name}-${ver}.tgz" -C "$UNP/npm-$name.tmp" || die "core npm package $spec: unpack failed"
  mv "$UNP/npm-$name.tmp" "$UNP/npm-$name"; touch "$MARK/unpack.npm.$name"
done

# linux-source ships one tarball: take a C subset + Documentation/ out of it
if [ -f "$MARK/unpack.linux-source-6.1" ] && [ ! -f "$MARK/unpack.linux-tree" ]; then
  tarball="$(compgen -G "$UNP/linux-source-6.1/usr/src/linux-source-*.tar.*" | head -n1 || true)"
  [ -n "$tarball" ] || die "core package linux-source-6.1: no source tarball inside"
  log "unpack: linux source subset from $(basename "$tarball")"
  rm -rf "$UNP/linux-tree" "$UNP/linux-tree.tmp"; mkdir -p "$UNP/linux-tree.tmp"
  top="$(basename "$tarball")"; top="${top%%.tar*}"
  # keep in step with LINUX_CODE_DIRS in extract.py
  subset=(kernel mm fs/ext4 fs/nfs fs/proc fs/fuse 'fs/*.c' 'fs/*.h' net/core net/ipv4 lib block ipc init
          include/linux arch/x86/kernel arch/x86/mm drivers/base drivers/usb/core security/selinux
          Documentation)
  pats=(); for s in "${subset[@]}"; do pats+=("$top/$s"); done
  # a pattern missing from the archive only makes tar warn and exit 2; judge by the tree
  tar -xJf "$tarball" -C "$UNP/linux-tree.tmp" --wildcards --no-wildcards-match-slash "${pats[@]}" \
    2>"$ROOT/linux-tar.log" || log "unpack: warning: tar reported problems (see $ROOT/linux-tar.log)"
  [ -d "$UNP/linux-tree.tmp/$top/kernel" ] || die "core package linux-source-6.1: tar subset failed (see $ROOT/linux-tar.log)"
  mv "$UNP/linux-tree.tmp" "$UNP/linux-tree"; touch "$MARK/unpack.linux-tree"
fi
S_UN=$(( $(date +%s) - S_UN ))
log "unpack: done in ${S_UN}s"

# ------------------------------------------------------ extract + assemble ----
S_EX=$(date +%s)
FAILED_LIST="$(IFS=,; echo "${FAILED_PKGS[*]:-}")"
"$PY" "$HERE/extract.py" --root "$ROOT" --jobs "$JOBS" $QFLAG --skip-packages "$FAILED_LIST" \
  || die "extraction failed (a core source; see messages above)"
S_EX=$(( $(date +%s) - S_EX ))
log "extract: done in ${S_EX}s"

"$PY" "$HERE/assemble.py" --root "$ROOT" $QFLAG \
  --stage-seconds "download=$S_DL,unpack=$S_UN,extract=$S_EX" \
  || die "assembling text/ and manifest.json failed"
echo "$STAMP" >"$ROOT/DONE.tmp" && mv -f "$ROOT/DONE.tmp" "$ROOT/DONE"
log "done: $ROOT ($(du -sh "$ROOT/text" | cut -f1) of text) in $(( $(date +%s) - T0 ))s"
