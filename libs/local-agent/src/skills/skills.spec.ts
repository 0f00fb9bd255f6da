import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { call, FakeHost, fakeContext } from '../testing/fake-host';
import { contentOf } from '../testing/history-fixtures';
import { runAgent } from '../testing/run-agent';
import { readSkillFile } from './skill-files';
import { loadSkill, loadSkills, parseSkillMarkdown } from './skill-loader';
import { buildSkillsMessage, MAX_INDEX_DESCRIPTION_CHARS, skillEntries } from './skill-tools';

/* Skills (docs/local-agent.md#skills): SKILL.md packages, the index, activate and the path-confined read_skill_file. */

describe('local agent skills', () => {
  let dir: string;
  let pdf: string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'la-skills-'));
    pdf = path.join(dir, 'pdf');
    mkdirSync(path.join(pdf, 'references'), { recursive: true });
    writeFileSync(
      path.join(pdf, 'SKILL.md'),
      '---\nname: pdf\ndescription: Fill PDF forms\n---\n\n# PDF\nUse references/guide.md.\n',
    );
    writeFileSync(path.join(pdf, 'references', 'guide.md'), 'step 1: open the form');
    writeFileSync(path.join(pdf, 'blob.bin'), Buffer.from([1, 0, 2]));
    writeFileSync(path.join(dir, 'secret.txt'), 'outside the skill');
    symlinkSync(path.join(dir, 'secret.txt'), path.join(pdf, 'escape.txt'));
    symlinkSync(path.join(pdf, 'references', 'guide.md'), path.join(pdf, 'inside-link.md'));
    mkdirSync(path.join(dir, 'broken'));
    writeFileSync(path.join(dir, 'broken', 'SKILL.md'), '# no front matter');
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a skill whose description is one 250 KB word; the index shows its first 1024 characters', async () => {
    const big = path.join(dir, 'big');
    mkdirSync(big);
    writeFileSync(path.join(big, 'SKILL.md'), `---\nname: big\ndescription: ${'w'.repeat(250_000)}\n---\nbody\n`);
    const skill = await loadSkill(big);
    expect(skill.description).toHaveLength(250_000);
    const index = buildSkillsMessage(skillEntries([], [skill]))!.content as string;
    const shown = /<description>(w*…)<\/description>/.exec(index)![1];
    expect(shown).toHaveLength(MAX_INDEX_DESCRIPTION_CHARS);
    expect(index.length).toBeLessThan(2 * MAX_INDEX_DESCRIPTION_CHARS);
  });

  it('parses SKILL.md front matter (name, description) and rejects packages without them', () => {
    expect(parseSkillMarkdown('---\nname: a-b\ndescription: "does x"\n---\nbody', 'x')).toEqual({
      name: 'a-b',
      description: 'does x',
      body: 'body',
    });
    expect(() => parseSkillMarkdown('no front matter', 'x')).toThrow('YAML front matter');
    expect(() => parseSkillMarkdown('---\nname: ../evil\ndescription: d\n---\n', 'x')).toThrow('name:');
    expect(() => parseSkillMarkdown('---\nname: ok\n---\n', 'x')).toThrow('description:');
    expect(() => parseSkillMarkdown('---\nname: [\n---\n', 'x')).toThrow('not valid YAML');
  });

  it('loads skill folders; a broken one is reported and left out', async () => {
    const warnings: string[] = [];
    const skills = await loadSkills([pdf, path.join(dir, 'broken'), path.join(dir, 'missing')], (m) =>
      warnings.push(m),
    );
    expect(skills.map((s) => s.name)).toEqual(['pdf']);
    expect(skills[0].instructions).toContain('# PDF');
    expect(warnings).toHaveLength(2);
  });

  it('read_skill_file stays inside the skill: no "..", no absolute paths, no symlink leaving the folder, no binaries', async () => {
    const skill = await loadSkill(pdf);
    await expect(readSkillFile(skill, 'references/guide.md')).resolves.toMatchObject({
      content: 'step 1: open the form',
    });
    await expect(readSkillFile(skill, 'inside-link.md')).resolves.toMatchObject({ content: 'step 1: open the form' });
    await expect(readSkillFile(skill, '.')).resolves.toMatchObject({
      type: 'directory',
      entries: expect.arrayContaining(['SKILL.md', 'references/']) as unknown,
    });
    await expect(readSkillFile(skill, '../secret.txt')).rejects.toThrow('must not contain ".."');
    await expect(readSkillFile(skill, 'references/../../secret.txt')).rejects.toThrow('must not contain ".."');
    await expect(readSkillFile(skill, path.join(dir, 'secret.txt'))).rejects.toThrow('must be relative');
    await expect(readSkillFile(skill, 'escape.txt')).rejects.toThrow('leaves the skill folder');
    await expect(readSkillFile(skill, 'blob.bin')).rejects.toThrow('binary');
    await expect(readSkillFile(skill, 'nope.md')).rejects.toThrow('does not exist');
  });

  it('a run with skill packages gets the index, activate returns the instructions, read_skill_file reads; escapes reach the model as errors', async () => {
    const host = new FakeHost().script(
      'm1',
      {
        tool_calls: [
          call('a1', 'activate', { skill_name: 'pdf' }),
          call('r1', 'read_skill_file', { skill_name: 'pdf', path: 'references/guide.md' }),
          call('r2', 'read_skill_file', { skill_name: 'pdf', path: 'escape.txt' }),
        ],
      },
      { text: 'filled' },
    );
    host.skill_roots = [pdf];
    await runAgent(host, fakeContext());
    const first = host.modelRequests[0];
    expect(first.tools.map((t) => t.function.name)).toEqual(['activate', 'read_skill_file']);
    expect(contentOf(first.messages[1])).toContain('<name>pdf</name>');
    const tools = host.modelRequests[1].messages.filter((m) => m.role === 'tool').map(contentOf);
    expect(tools[0]).toContain('## Instructions\n# PDF');
    expect(tools[1]).toContain('step 1: open the form');
    expect(tools[2]).toMatch(/^Error: Tool execution failed: path: escape.txt leaves the skill folder/);
    expect(tools.join()).not.toContain('outside the skill');
    expect(host.callsOf('tool.call')).toEqual([]); // local tools never go to the host
  });
});
