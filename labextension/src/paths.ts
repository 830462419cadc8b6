/** Paths: where a file named by the server can be opened from in JupyterLab. */

/**
 * `path` relative to the Jupyter server root `root` (what the contents API and the document
 * manager take), the path itself when it is already relative, or null when it lies outside
 * the root and so cannot be opened from the browser.
 */
export function relativeToRoot(path: string, root: string): string | null {
  const norm = (p: string) => p.replace(/\\/g, '/').replace(/\/+$/, '');
  const p = norm(path);
  if (!p.startsWith('/') && !/^[A-Za-z]:\//.test(p)) {
    return p.replace(/^\.\//, '');
  }
  const r = norm(root);
  if (r && (p === r || p.startsWith(r + '/'))) {
    return p.slice(r.length + 1);
  }
  return null;
}

/** A name in a folder not taken yet: `name`, else `stem-1.ipynb`, ... (one listing, no 404 probes). */
export function freeName(name: string, taken: ReadonlySet<string>): string {
  if (!taken.has(name)) {
    return name;
  }
  const stem = name.replace(/\.ipynb$/, '');
  for (let i = 1; ; i++) {
    const candidate = `${stem}-${i}.ipynb`;
    if (!taken.has(candidate)) {
      return candidate;
    }
  }
}
