import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { SkillPackage } from './skill-loader';

/*
 * Reading a skill's files, confined to the skill's folder: a relative path without "..", and
 * the real path (symlinks resolved) must stay inside the folder's real path, so neither a
 * crafted path nor a symlink in the package can reach anything else on the host.
 */

export const MAX_SKILL_FILE_BYTES = 256 * 1024;
const MAX_LISTING = 200;

export class SkillPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SkillPathError';
  }
}

/** The real path of `rel` inside the skill, or SkillPathError naming the rule it breaks. */
export async function resolveSkillPath(skill: SkillPackage, rel: string): Promise<string> {
  if (typeof rel !== 'string' || rel === '' || rel.includes('\0')) {
    throw new SkillPathError('path: must be a non-empty relative path');
  }
  if (path.isAbsolute(rel) || /^[A-Za-z]:/.test(rel) || rel.startsWith('\\')) {
    throw new SkillPathError('path: must be relative to the skill folder');
  }
  if (rel.split(/[\\/]+/).includes('..')) {
    throw new SkillPathError('path: must not contain ".."');
  }
  const target = path.resolve(skill.root, rel);
  let real: string;
  try {
    real = await fs.realpath(target);
  } catch {
    throw new SkillPathError(`path: ${rel} does not exist in skill ${skill.name}`);
  }
  if (real !== skill.root && !real.startsWith(skill.root + path.sep)) {
    throw new SkillPathError(`path: ${rel} leaves the skill folder`);
  }
  return real;
}

export interface SkillFileView {
  skill_name: string;
  path: string;
  type: 'file' | 'directory';
  content?: string;
  entries?: string[];
  truncated?: boolean;
}

/** A text file's content, or a directory's entries (names, "/" after folders). */
export async function readSkillFile(skill: SkillPackage, rel: string): Promise<SkillFileView> {
  const real = await resolveSkillPath(skill, rel);
  const stat = await fs.stat(real);
  if (stat.isDirectory()) {
    const dirents = await fs.readdir(real, { withFileTypes: true });
    const entries = dirents
      .map((d) => (d.isDirectory() ? `${d.name}/` : d.name))
      .sort()
      .slice(0, MAX_LISTING);
    return { skill_name: skill.name, path: rel, type: 'directory', entries, truncated: dirents.length > MAX_LISTING };
  }
  if (!stat.isFile()) {
    throw new SkillPathError(`path: ${rel} is not a regular file`);
  }
  const handle = await fs.open(real, 'r');
  try {
    const buf = Buffer.alloc(Math.min(stat.size, MAX_SKILL_FILE_BYTES));
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    const bytes = buf.subarray(0, bytesRead);
    if (bytes.includes(0)) {
      throw new SkillPathError(`path: ${rel} is a binary file`);
    }
    return {
      skill_name: skill.name,
      path: rel,
      type: 'file',
      content: bytes.toString('utf8'),
      truncated: stat.size > MAX_SKILL_FILE_BYTES,
    };
  } finally {
    await handle.close();
  }
}
