<?xml version="1.0" encoding="utf-8"?>
<!-- astro-jupyter's test catalogs for GAVO DaCHS (tests/fixtures_tap.py copies this to
     /var/gavo/inputs/astrojup/q.rd, runs `dachs imp astrojup/q` and serves it over TAP).

     - astrojup.stars: 200,000 synthetic stars (fixed seed), for sync/async queries, cones and
       the 1,000 / 100,000-row benchmark.
     simbad.rd beside it holds the SIMBAD-shaped tables. -->
<resource schema="astrojup">
  <meta name="title">astro-jupyter test catalogs</meta>
  <meta name="description">Synthetic stars for the tests.</meta>
  <meta name="creationDate">2026-12-03T00:00:00</meta>
  <meta name="subject">Catalogs</meta>
  <meta name="creator.name">astro-jupyter</meta>

  <table id="stars" onDisk="True" adql="True" mixin="//scs#q3cindex">
    <meta name="description">Synthetic stars; positions uniform on the sphere.</meta>
    <column name="source_id" type="bigint" ucd="meta.id;meta.main" description="Star number"/>
    <column name="ra" type="double precision" unit="deg" ucd="pos.eq.ra;meta.main" description="Right ascension (ICRS)"/>
    <column name="dec" type="double precision" unit="deg" ucd="pos.eq.dec;meta.main" description="Declination (ICRS)"/>
    <column name="vmag" type="real" unit="mag" ucd="phot.mag;em.opt.V" description="V magnitude"/>
    <column name="plx" type="real" unit="mas" ucd="pos.parallax" description="Parallax"/>
  </table>

  <data id="import_stars">
    <sources item="200000"/>
    <embeddedGrammar>
      <iterator><code>
        import math, random
        rng = random.Random(20261203)
        for i in range(int(self.sourceToken)):
          yield {"source_id": i, "ra": rng.uniform(0, 360),
            "dec": math.degrees(math.asin(rng.uniform(-1, 1))),
            "vmag": round(rng.uniform(4, 20), 3), "plx": round(rng.uniform(0.01, 50), 4)}
        # a few stars around M 87 (187.70593, +12.39112) for the cone tests
        for k in range(12):
          yield {"source_id": 900000 + k, "ra": 187.70593 + 0.01 * (k % 4), "dec": 12.39112 + 0.01 * (k // 4),
            "vmag": 10.0 + k, "plx": 1.0}
      </code></iterator>
    </embeddedGrammar>
    <make table="stars"/>
  </data>

</resource>
