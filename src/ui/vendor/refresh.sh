#!/bin/sh
# Refreshes src/ui/vendor/ from the npm registry: the exact versions below, each file
# copied as published, except that (1) the `//# sourceMappingURL=` line is dropped (the maps
# are not vendored), (2) preact/hooks' one bare import `from"preact"` becomes
# `from"./preact.module.js"` (no import map: the page's CSP allows no inline script) and
# (3) xterm.mjs's inline styles go through the CSSOM (below).
# Run from anywhere: sh src/ui/vendor/refresh.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm install --prefix "$tmp" --no-audit --no-fund --save-exact --ignore-scripts \
  preact@10.27.2 htm@3.1.1 marked@18.2.1 dompurify@3.5.0 @xterm/xterm@6.0.0 @xterm/addon-fit@0.11.0 \
  diff@9.0.0 >/dev/null
m="$tmp/node_modules"
copy() { sed -e '/^\/\/# sourceMappingURL=/d' -e 's|from"preact"|from"./preact.module.js"|' "$1" > "$here/$2"; }
copy "$m/preact/dist/preact.module.js" preact.module.js
copy "$m/preact/hooks/dist/hooks.module.js" hooks.module.js
copy "$m/htm/dist/htm.module.js" htm.module.js
copy "$m/marked/lib/marked.esm.js" marked.esm.js
copy "$m/dompurify/dist/purify.es.mjs" purify.es.mjs
copy "$m/@xterm/xterm/lib/xterm.mjs" xterm.mjs
# (3) xterm.js styles through <style> elements and `style` attributes, both of which the
# page's CSP (`style-src 'self'`) refuses, each refusal a console error: its three <style>
# elements become <template>s (inert, never shown; js/views/terminal.js mirrors their text
# into constructed style sheets) and its one setAttribute("style") sets the CSSOM's cssText.
sed -i -e 's/createElement("style")/createElement("template")/g' \
  -e 's/_addStyle(t,e){t.setAttribute("style",`${t.getAttribute("style")||""}${e};`)}/_addStyle(t,e){t.style.cssText+=`;${e};`}/' \
  "$here/xterm.mjs"
[ "$(grep -o 'createElement("template")' "$here/xterm.mjs" | wc -l)" = 3 ] && ! grep -q 'setAttribute("style"' "$here/xterm.mjs" \
  || { echo "xterm.mjs changed shape: check the CSP edits" >&2; exit 1; }
copy "$m/@xterm/addon-fit/lib/addon-fit.mjs" addon-fit.mjs
cp "$m/@xterm/xterm/css/xterm.css" "$here/xterm.css"
# jsdiff: the line diff and the two modules it imports, in the package's own layout.
mkdir -p "$here/jsdiff/diff" "$here/jsdiff/util"
for f in diff/line.js diff/base.js util/params.js; do copy "$m/diff/libesm/$f" "jsdiff/$f"; done
mkdir -p "$here/licenses"
cp "$m/preact/LICENSE" "$here/licenses/preact.LICENSE"
cp "$m/htm/LICENSE" "$here/licenses/htm.LICENSE"
cp "$m/marked/LICENSE" "$here/licenses/marked.LICENSE"
cp "$m/dompurify/LICENSE" "$here/licenses/dompurify.LICENSE"
cp "$m/@xterm/xterm/LICENSE" "$here/licenses/xterm.LICENSE"
cp "$m/@xterm/addon-fit/LICENSE" "$here/licenses/xterm-addon-fit.LICENSE"
cp "$m/diff/LICENSE" "$here/licenses/jsdiff.LICENSE"
echo "vendored into $here"
