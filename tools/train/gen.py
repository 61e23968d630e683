"""The demo model's training text, generated from the carried source pack
(fetch_corpus.py) deterministically by seed (issue 26).

Why a generator: no registry ships stories or a chat corpus of size, and a
small block-diffusion model needs answers of 40-200 tokens in predictable
shapes (a 32-row block spends passes on every padding row after a short
answer). Each task writes full sentences in one of a few fixed shapes:

  identity   greetings, "who are you", thanks: "I am Clover, a small demo model..."
  country    capital, region, languages, currency, neighbours, a short profile
  wiki       "What is X?" / "Who was X?" / "Tell me about X." -> the Wikipedia lead
  define     a WordNet sense as sentences: part of speech, meaning, kind of, example
  story      templated short stories (our own word lists)
  math       addition, subtraction, multiplication with the working shown
  why        short explanations of everyday things (our own text)
  quote      a fortune-file quote or riddle, framed
  joke       one of our own jokes, with why it is funny (facts.py)
  fact       a record fact ("the largest animal") in a few sentences (facts.py)
  unknown    what a small offline model cannot know: "I don't know that", and what it can do
  multi      two or three of the above in one conversation, small talk first,
             sometimes a country follow-up ("And what about Spain?")

The user turns come from prompts.py (gen26): many phrasings per intent, polite
wrappers, casing, punctuation and rare typos, so that the intent and not one
fixed string decides the answer; the answers' shapes are unchanged.

Every exchange is rendered in clover's chat template (src/text/chat_template.c:
earlier assistant turns without a think block); 80% with thinking off (the
generation prompt ends `<think>\\n\\n</think>\\n\\n`), 20% with thinking on and
one short templated thought (`clover run` thinks by default). The 20 prompts of
heldout.txt are never produced as a user turn (nor, those of 4+ words, inside one).

    python3 tools/train/gen.py --corpus .gpu-train/corpus --n 20   # print samples
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import re

import prompts as P
from facts import FACTS, JOKES, UNKNOWN, WHY_ALT, WHY_MORE

HERE = os.path.dirname(os.path.abspath(__file__))

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK_OFF = "<think>\n\n</think>\n\n"
EOT = "<|endoftext|>"

LANGS = {"en": "English", "fr": "French", "ar": "Arabic", "es": "Spanish", "pt": "Portuguese",
         "ru": "Russian", "de": "German", "it": "Italian", "zh": "Chinese", "nl": "Dutch",
         "sw": "Swahili", "hy": "Armenian", "ta": "Tamil", "hi": "Hindi", "uz": "Uzbek",
         "no": "Norwegian", "bs": "Bosnian", "hr": "Croatian", "sr": "Serbian", "el": "Greek",
         "tr": "Turkish", "sv": "Swedish", "ro": "Romanian", "sk": "Slovak", "ur": "Urdu",
         "af": "Afrikaans", "sq": "Albanian", "sm": "Samoan", "ko": "Korean", "ms": "Malay",
         "ja": "Japanese", "pl": "Polish", "he": "Hebrew", "id": "Indonesian", "is": "Icelandic",
         "ka": "Georgian", "ht": "Haitian Creole", "km": "Khmer", "fi": "Finnish", "mt": "Maltese",
         "fa": "Persian", "uk": "Ukrainian", "ga": "Irish", "mn": "Mongolian", "et": "Estonian",
         "mk": "Macedonian", "la": "Latin", "kk": "Kazakh", "da": "Danish", "cs": "Czech",
         "bn": "Bengali", "bg": "Bulgarian", "th": "Thai", "sl": "Slovenian", "lt": "Lithuanian",
         "be": "Belarusian", "ca": "Catalan", "lo": "Lao", "am": "Amharic", "lv": "Latvian",
         "my": "Burmese", "hu": "Hungarian", "ne": "Nepali", "az": "Azerbaijani", "vi": "Vietnamese",
         "so": "Somali", "ps": "Pashto", "ku": "Kurdish", "tl": "Tagalog", "si": "Sinhala",
         "ti": "Tigrinya", "qu": "Quechua", "mg": "Malagasy", "zu": "Zulu", "xh": "Xhosa",
         "dz": "Dzongkha", "lb": "Luxembourgish", "ky": "Kyrgyz", "tg": "Tajik", "tk": "Turkmen"}
MONEY = {"EUR": "the euro", "USD": "the United States dollar", "AUD": "the Australian dollar",
         "XCD": "the East Caribbean dollar", "XOF": "the West African CFA franc",
         "XAF": "the Central African CFA franc", "NZD": "the New Zealand dollar",
         "GBP": "the pound sterling", "DKK": "the Danish krone", "ZAR": "the South African rand",
         "INR": "the Indian rupee", "ILS": "the Israeli new shekel", "NOK": "the Norwegian krone",
         "MAD": "the Moroccan dirham", "CHF": "the Swiss franc", "JPY": "the Japanese yen",
         "CNY": "the Chinese yuan", "RUB": "the Russian ruble", "BRL": "the Brazilian real",
         "MXN": "the Mexican peso", "CAD": "the Canadian dollar", "SEK": "the Swedish krona",
         "PLN": "the Polish zloty", "TRY": "the Turkish lira", "EGP": "the Egyptian pound",
         "NGN": "the Nigerian naira", "KES": "the Kenyan shilling", "KRW": "the South Korean won",
         "THB": "the Thai baht", "VND": "the Vietnamese dong", "IDR": "the Indonesian rupiah",
         "PHP": "the Philippine peso", "PKR": "the Pakistani rupee", "BDT": "the Bangladeshi taka",
         "ARS": "the Argentine peso", "CLP": "the Chilean peso", "COP": "the Colombian peso",
         "PEN": "the Peruvian sol", "HUF": "the Hungarian forint", "CZK": "the Czech koruna",
         "RON": "the Romanian leu", "BGN": "the Bulgarian lev", "ISK": "the Icelandic krona",
         "UAH": "the Ukrainian hryvnia", "SAR": "the Saudi riyal", "AED": "the UAE dirham",
         "IRR": "the Iranian rial", "IQD": "the Iraqi dinar", "JMD": "the Jamaican dollar",
         "SGD": "the Singapore dollar", "MYR": "the Malaysian ringgit", "HKD": "the Hong Kong dollar",
         "TWD": "the New Taiwan dollar", "ETB": "the Ethiopian birr", "GHS": "the Ghanaian cedi",
         "TZS": "the Tanzanian shilling", "UGX": "the Ugandan shilling", "DZD": "the Algerian dinar",
         "TND": "the Tunisian dinar", "LKR": "the Sri Lankan rupee", "NPR": "the Nepalese rupee"}

NAMES = ["Lily", "Max", "Mia", "Sam", "Anna", "Leo", "Emma", "Ben", "Zoe", "Tom", "Lucy", "Jack",
         "Ella", "Noah", "Ruby", "Finn", "Rosa", "Omar", "Nina", "Ivan", "Maya", "Hugo", "Ada", "Kai",
         "Tara", "Eli", "Sara", "Luca", "Iris", "Theo", "June", "Amir", "Nora", "Pablo", "Yuki", "Milo"]
ANIMALS = ["dog", "cat", "mouse", "fox", "rabbit", "bear", "owl", "duck", "horse", "turtle", "frog",
           "lion", "elephant", "squirrel", "pig", "goat", "hedgehog", "penguin", "deer", "bird",
           "puppy", "kitten", "wolf", "monkey", "cow", "sheep", "tiger", "bee", "fish", "dragon"]
ADJ = ["little", "brave", "curious", "shy", "kind", "clever", "sleepy", "happy", "small", "young",
       "old", "gentle", "playful", "quiet", "friendly", "tiny"]
PLACES = ["a small village", "a quiet forest", "a big city", "a farm near the river",
          "a house by the sea", "a green valley", "a snowy mountain town", "a busy market street",
          "a garden full of flowers", "an old castle", "a sunny island", "a little cottage in the woods"]
OBJECTS = ["a red ball", "an old key", "a shiny stone", "a blue kite", "a wooden box", "a map",
           "a golden bell", "a lost hat", "a tiny boat", "a music box", "a yellow umbrella",
           "a basket of apples", "a strange seed", "a silver coin", "a paper lantern", "a warm scarf"]
WHERE = ["under a tree", "near the pond", "behind the barn", "on the path", "in the tall grass",
         "by the old fence", "at the top of the hill", "next to the river"]
PROBLEMS = [("the {o} belonged to someone else", "find its owner",
             "asked everyone in town until an old {a2} smiled and said it was hers"),
            ("a storm was coming", "get home before the rain",
             "ran along the path and reached home just as the first drops fell"),
            ("{n} was lost and could not find the way home", "find the way back",
             "followed the river, because the river always ran past home"),
            ("{p} friend the {a2} was sad", "cheer up the {a2}",
             "shared the {o2} and played together until the {a2} laughed"),
            ("the bridge over the river was broken", "cross the river",
             "built a little raft from sticks and floated across"),
            ("it was very cold and {p} friend had no warm place to sleep",
             "help the {a2}", "made a cozy bed of leaves and shared a warm blanket"),
            ("the {o} was stuck high up in a tree", "get it down",
             "asked a tall giraffe for help, and the giraffe reached it easily"),
            ("{n} wanted to win the big race", "run faster",
             "practiced every morning, and on the day of the race ran the best race of all")]
FEEL = ["worried", "sad", "a little scared", "unsure", "confused", "nervous"]
MORALS = ["it is always better to ask for help", "kindness makes everyone happier",
          "friends can do more together than alone", "being patient pays off",
          "it is good to be brave even when you are scared", "sharing makes things better",
          "practice helps us grow", "honesty is the best choice"]
ENDS = ["happy", "proud", "glad", "full of joy", "very happy", "calm and happy"]

WHY = {
    "Why do leaves change color in autumn?":
        "Leaves are green because they hold chlorophyll, which helps the tree make food from "
        "sunlight. In autumn the days get shorter and colder, so the tree stops making chlorophyll. "
        "As the green fades, other colors that were hidden in the leaf, like yellow and orange, can "
        "be seen. Some trees also make red colors in autumn. So the leaves change color because the "
        "green goes away.",
    "Why does ice float on water?":
        "Ice floats because it is lighter than the same amount of liquid water. When water freezes, "
        "its small parts line up in an open pattern with more space between them. This makes ice "
        "less dense than water, so it rises to the top. That is why lakes freeze from the top down, "
        "and fish can still live in the water below.",
    "Why do we need to sleep?":
        "We need sleep because the body and the brain use it to rest and repair. While we sleep, "
        "the brain sorts what we learned during the day, and the body fixes muscles and grows. "
        "Without enough sleep, people feel tired, find it hard to think, and get sick more easily. "
        "Most adults need about seven to nine hours of sleep each night.",
    "Why is the ocean salty?":
        "The ocean is salty because rivers carry tiny amounts of salt from rocks on land into the "
        "sea. When ocean water warms in the sun, the water evaporates but the salt stays behind. "
        "Over millions of years, the salt has built up. That is why the ocean is salty while most "
        "rivers and lakes taste fresh.",
    "Why does it rain?":
        "It rains because water from oceans, lakes and rivers warms in the sun and rises into the "
        "air as vapor. High in the sky the air is cold, so the vapor turns into tiny drops that "
        "make clouds. When the drops join together and become too heavy, they fall to the ground "
        "as rain. Then the water flows back to the sea, and the cycle starts again.",
    "Why does the moon change shape?":
        "The moon does not really change shape. It is always a round ball, and the sun lights up "
        "half of it. As the moon travels around the Earth, we see different parts of its lit half. "
        "Sometimes we see all of it, a full moon, and sometimes only a thin slice. This cycle "
        "takes about a month.",
    "Why do cats purr?":
        "Cats purr by moving the muscles in their throat very quickly while they breathe. They "
        "often purr when they are happy and relaxed, for example when someone pets them. But cats "
        "also purr when they are hurt or scared, which may help them calm down. So purring is a "
        "way for a cat to show and to soothe its feelings.",
    "Why do we have seasons?":
        "We have seasons because the Earth is tilted as it travels around the sun. For part of the "
        "year, one half of the Earth leans toward the sun and gets more direct sunlight, so it is "
        "summer there. Later in the year that half leans away, gets less sunlight, and has winter. "
        "Spring and autumn come in between.",
    "How do plants grow?":
        "Plants grow by making their own food from sunlight. Their leaves take in light, air and "
        "water, and turn them into sugar that gives the plant energy. The roots take up water and "
        "minerals from the soil. With light, water and good soil, a plant makes new cells and "
        "grows taller, step by step.",
    "Why do birds fly south in winter?":
        "Many birds fly south in winter because food becomes hard to find where they live. In cold "
        "places, insects disappear and the ground freezes. In warmer places there is still plenty "
        "to eat. So the birds travel south for the winter and come back in spring, when the days "
        "get warm again.",
    "What makes thunder?":
        "Thunder is made by lightning. A bolt of lightning heats the air around it very quickly, "
        "and the hot air expands with a loud boom. That boom is the thunder we hear. Because light "
        "travels faster than sound, we see the flash first and hear the thunder a moment later.",
    "Why do we brush our teeth?":
        "We brush our teeth to keep them clean and healthy. Tiny germs live in the mouth and feed "
        "on bits of food, making acid that can damage the teeth. Brushing removes the food and "
        "the germs before they can cause holes. Brushing twice a day also keeps the gums healthy "
        "and the breath fresh.",
    "Why is exercise good for you?":
        "Exercise is good for you because it makes the heart and the muscles stronger. When you "
        "move, your heart pumps more blood, and your body learns to use energy well. Exercise also "
        "helps you sleep better and feel happier. Even a short walk every day makes a difference.",
    "How does a rainbow form?":
        "A rainbow forms when sunlight shines through drops of rain. Sunlight looks white, but it "
        "is made of many colors. Each raindrop bends the light and splits it into red, orange, "
        "yellow, green, blue and violet. When the sun is behind you and the rain is in front of "
        "you, you can see these colors as a bright arc in the sky.",
    "Why do we have day and night?":
        "We have day and night because the Earth spins. It turns around once every day. The side "
        "of the Earth that faces the sun has daytime, and the side that faces away has night. As "
        "the Earth keeps turning, each place moves from day into night and back again.",
    "Why does bread rise?":
        "Bread rises because of yeast, a tiny living thing mixed into the dough. The yeast eats "
        "sugar in the flour and gives off a gas. The gas makes small bubbles that get trapped in "
        "the dough, so the dough puffs up. When the bread bakes, the bubbles stay and make it soft "
        "and light.",
}

HELDOUT = os.path.join(HERE, "heldout.txt")


def norm(s: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", s.lower()).strip()


def heldout_prompts() -> list[str]:
    with open(HELDOUT, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def load_corpus(path: str) -> dict:
    out = {}
    for n in ("wordnet", "countries", "wiki", "chat", "prose", "fortunes"):
        with lzma.open(os.path.join(path, n + ".jsonl.xz"), "rt", encoding="utf-8") as f:
            out[n] = [json.loads(ln) for ln in f]
    return out


def _space(s: str) -> str:
    return " " + " ".join(s.split()) + " "


def a_an(w: str) -> str:
    return ("an " if w[:1].lower() in "aeiou" else "a ") + w


def join_list(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


class Gen:
    """gen.exchange(rng) -> (messages, think) ; gen.render(...) -> (prompt, completion)."""

    def __init__(self, corpus: dict):
        self.c = corpus
        self.banned = {norm(p) for p in heldout_prompts()}
        # held-out prompts of 4+ words are also kept out inside a longer turn
        # ("Hey, write a short story about a girl and her cat."); short ones
        # ("Hello!", "Who are you?") only as the whole turn, or no greeting is left
        self.banned_in = [f" {b} " for b in self.banned if len(b.split()) >= 4]
        self.countries = [c for c in corpus["countries"] if c["capital"]]
        self.wiki = corpus["wiki"]
        self.words = corpus["wordnet"]
        self.smalltalk = [c for c in corpus["chat"]]
        self.prose = corpus["prose"]
        quotes = [f for f in corpus["fortunes"] if f["file"] != "riddles"]
        self.quotes = quotes
        self.riddles = [f for f in corpus["fortunes"] if f["file"] == "riddles"
                        and "Q:" in f["text"] and "A:" in f["text"]]
        self.tasks = [("identity", 8), ("country", 16), ("wiki", 15), ("define", 13),
                      ("story", 17), ("math", 8), ("why", 5), ("quote", 3), ("joke", 3),
                      ("fact", 3), ("unknown", 3), ("multi", 12)]

    # ---- tasks: each returns (question, answer, thought) ----

    def identity(self, r):
        name = "Clover"
        kind = r.choice(["hi", "hi", "hi", "how", "how", "who", "who", "who", "can", "thanks", "thanks", "bye"])
        if kind == "hi":
            q = P.say(r, P.GREET)
        elif kind == "how":
            q = P.say(r, P.HOW) if r.random() < 0.6 else \
                P.say(r, ["{g} {h}"], g=r.choice(P.GREET), h=r.choice(P.HOW[1:]))
        else:
            q = P.say(r, {"who": P.WHO, "can": P.CAN, "thanks": P.THANKS, "bye": P.BYE}[kind])
        me = r.choice([f"I am {name}, a small demo model.", f"My name is {name}. I am a small demo model.",
                       f"I am {name}, a small language model made to show how the clover engine works."])
        how = r.choice(["I write several words at once with block diffusion, instead of one word at a time.",
                        "I was trained to answer by filling in a whole block of words in a few steps.",
                        "I fill in blocks of words in parallel, which is what block diffusion means."])
        know = r.choice(["I know a little about countries, the meanings of words, famous people and places, "
                         "and simple arithmetic, and I can tell short stories.",
                         "I can answer simple questions about countries and words, do small sums, explain "
                         "a few everyday things and tell short stories.",
                         "I can tell you about countries and their capitals, explain words, do simple math "
                         "and tell you a short story."])
        offer = r.choice(["How can I help you today?", "What would you like to talk about?",
                          "What can I do for you?", "Ask me anything, and I will do my best."])
        if kind == "hi":
            a = f"{r.choice(['Hello', 'Hi', 'Hi there', 'Hello there'])}! {me} {know} {offer}"
        elif kind == "how":
            a = f"I am doing well, thank you for asking! {me} {know} {offer}"
        elif kind == "who":
            a = f"{me} {how} {know} I am small, so I can make mistakes. {offer}"
        elif kind == "can":
            a = f"{know} {how} {offer}"
        elif kind == "thanks":
            a = r.choice(["You are welcome!", "You are very welcome!", "I am glad I could help!"]) + \
                f" If you have another question, just ask. {me} {know}"
        else:
            a = "Goodbye! It was nice talking with you. " + r.choice(
                ["Come back any time you want a story or a fact.", "Have a wonderful day!"]) + f" {me}"
        return q, a, "The user greets me or asks about me. I answer kindly and say who I am."

    def country(self, r, c=None, k=None, follow=False):
        c = c or r.choice(self.countries)
        n, cap = c["name"], c["capital"]
        langs = [LANGS[x] for x in c["languages"] if x in LANGS]
        money = [MONEY[x] for x in c["currencies"] if x in MONEY]
        where = c["subregion"] or c["region"]
        s_cap = f"The capital of {n} is {cap}."
        s_where = f"{n} is a country in {where}" + (f", in {c['region']}." if c["region"] and
                                                   c["region"] not in where else ".")
        s_lang = (f"People in {n} speak {join_list(langs)}." if langs else "")
        s_money = (f"The money used in {n} is {join_list(money)}." if money else "")
        s_bord = (f"{n} shares borders with {join_list(c['borders'][:6])}." if c["borders"]
                  else f"{n} has no land borders with other countries.")
        s_pop = (f"About {int(c['population']):,} people live there." if c.get("population") else "")
        k = k or r.choice(["capital", "capital", "where", "lang", "money", "borders", "about"])
        T = {"capital": P.CAPITAL, "where": P.WHERE, "lang": P.LANG, "money": P.MONEY,
             "borders": P.BORDERS, "about": P.ABOUT}
        if k == "capital":
            a = f"{s_cap} {cap} is the seat of the government of {n}. {s_where} {s_lang}"
        elif k == "where":
            a = f"{s_where} {s_bord} {s_cap}"
        elif k == "lang":
            if not langs:
                return self.country(r)
            a = f"{s_lang} {s_where} {s_cap}"
        elif k == "money":
            if not money:
                return self.country(r)
            a = f"{s_money} {s_where} {s_cap}"
        elif k == "borders":
            a = f"{s_bord} {s_where} {s_cap}"
        else:
            a = " ".join(x for x in (s_where, s_cap, s_lang, s_money, s_pop, s_bord) if x)
        q = P.say(r, P.FOLLOW[k] if follow else T[k], n=n)
        a = re.sub(r"\s+", " ", a).strip()
        return q, a, f"The user asks about {n}. I give the facts I know in full sentences."

    def wiki_task(self, r):
        w = r.choice(self.wiki)
        t, text = w["title"], w["text"]
        person = re.search(r"\(\d{3,4}|born|actor|writer|singer|politician|player|scientist|painter|"
                           r"composer|philosopher|king|queen|emperor|president|poet|novelist|"
                           r"physicist|chemist|mathematician|explorer|leader|musician|artist",
                           w["desc"], re.I)
        tq = t
        if t[:1].isupper() and " " in t and t[0].lower() + t[1:] in text:
            tq = t[0].lower() + t[1:]                    # "What is brown dwarf?", not "Brown dwarf"
        q = P.say(r, P.PERSON if person else P.THING, t=tq)
        return q, text, f"The user asks about {t}. I explain it in a few sentences."

    def define(self, r):
        e = r.choice(self.words)
        w, pos, g = e["w"], e["pos"], e["gloss"]
        q = P.say(r, P.DEFINE + (P.DEFINE_NOUN if pos == "noun" else P.DEFINE_VERB if pos == "verb" else []),
                  w=w, aw=a_an(w))
        a = f'The word "{w}" is {a_an(pos)}. It means {g}.'
        if pos == "noun":
            a = f'The word "{w}" is a noun. {a_an(w).capitalize()} is {g}.'
            if e.get("hyper"):
                a += f" {a_an(w).capitalize()} is a kind of {e['hyper'].replace('_', ' ')}."
        elif pos == "verb":
            a = f'The word "{w}" is a verb. To {w} means to {re.sub(r"^to ", "", g)}.'
        if e.get("syn"):
            syn = join_list([f'"{s}"' for s in e["syn"]])
            a += f" Words with a similar meaning are {syn}."
        if e.get("ex"):
            a += f' For example: "{e["ex"][0]}."'
        else:
            a += f' For example, you could say: "I looked the word {w} up in a dictionary."'
        a = a.replace("..", ".")
        return q, a, f'The user asks what "{w}" means. I give its part of speech and meaning.'

    def story(self, r):
        name, an, adj = r.choice(NAMES), r.choice(ANIMALS), r.choice(ADJ)
        a2 = r.choice([x for x in ANIMALS if x != an])
        o, o2 = r.sample(OBJECTS, 2)
        p = r.choice(["his", "her"])
        he = "he" if p == "his" else "she"
        prob, goal, sol = r.choice(PROBLEMS)
        fill = dict(o=o[o.index(" ") + 1:], o2=o2[o2.index(" ") + 1:], a2=a2, p=p, n=name)
        prob, goal, sol = (x.format(**fill) for x in (prob, goal, sol))
        kid = r.random() < 0.2
        slots = dict(an=an, adj=adj, name=name, o=o, a2=a2, p=p, kid="girl" if p == "her" else "boy",
                     aan=a_an(an), aadj=a_an(adj), aa2=a_an(a2))
        u = r.random()
        q = P.say(r, P.STORY_KID if kid else P.STORY_PLAIN if u < 0.25 else P.STORY_ANIMAL, **slots)
        first = (f"Once upon a time, there was {a_an(adj)} {slots['kid']} named {name} who had a {an}."
                 if kid else f"Once upon a time, there was {a_an(adj)} {an} named {name}.")
        parts = [first,
                 f"{name} lived in {r.choice(PLACES)}.",
                 f"One day, {name} found {o} {r.choice(WHERE)}.",
                 f"But {prob}, and {name} felt {r.choice(FEEL)}.",
                 f"{name} wanted to {goal}.",
                 f"So {he} {sol}.",
                 f"{name} learned that {r.choice(MORALS)}.",
                 f"From that day on, {name} the {slots['kid'] if kid else an} was {r.choice(ENDS)}. The end."]
        text = " ".join(parts)
        text = text[0].upper() + text[1:]
        return q, text, "The user wants a short story. I tell a simple story with a happy ending."

    def math(self, r):
        k = r.choice(["add", "add", "sub", "mul"])
        if k == "add":
            x, y = r.randint(2, 99), r.randint(2, 99)
            q = P.say(r, P.ADD, x=x, y=y)
            tx, ox, ty, oy = x // 10 * 10, x % 10, y // 10 * 10, y % 10
            a = (f"{x} plus {y} is {x + y}. To work it out, add the tens first: {tx} + {ty} = {tx + ty}. "
                 f"Then add the ones: {ox} + {oy} = {ox + oy}. Finally, {tx + ty} + {ox + oy} = {x + y}. "
                 f"So the answer is {x + y}.")
        elif k == "sub":
            x, y = sorted((r.randint(2, 99), r.randint(2, 99)), reverse=True)
            q = P.say(r, P.SUB, x=x, y=y)
            a = (f"{x} minus {y} is {x - y}. To check it, add back: {x - y} + {y} = {x}. "
                 f"So the answer is {x - y}.")
        else:
            x, y = r.randint(2, 12), r.randint(2, 12)
            q = P.say(r, P.MUL, x=x, y=y)
            a = (f"{x} times {y} is {x * y}. Multiplying means adding {x} to itself {y} times: "
                 + " + ".join([str(x)] * y) + f" = {x * y}. So the answer is {x * y}.")
        return q, a, "The user asks a math question. I work it out step by step."

    def why(self, r):
        i = r.randrange(len(WHY) + len(WHY_MORE))
        if i < len(WHY):
            k = list(WHY)[i]
            qs, a = [k] + WHY_ALT.get(k, []), WHY[k]
        else:
            qs, a = WHY_MORE[i - len(WHY)]
        return P.say(r, qs), a, "The user asks why something happens. I explain it simply."

    def quote(self, r):
        if self.riddles and r.random() < 0.3:
            f = r.choice(self.riddles)["text"]
            m = re.search(r"Q:\s*(.*?)\s*A:\s*(.*)", f, re.S) or re.search(r"A:\s*(.*?)\s*Q:\s*(.*)", f, re.S)
            qa = [re.sub(r"\s+", " ", x).strip() for x in m.groups()]
            if f.find("A:") < f.find("Q:"):
                qa = qa[::-1]
            q = P.say(r, P.RIDDLE)
            return q, f"Here is a riddle. {qa[0]} The answer is: {qa[1]} I hope you liked it!", \
                "The user wants a riddle. I give one with its answer."
        f = r.choice(self.quotes)["text"]
        m = re.match(r"(.*?)\s*--\s*(.+)$", f, re.S)
        body, who = (m.group(1), m.group(2)) if m else (f, None)
        body = re.sub(r"\s+", " ", body).strip()
        who = re.sub(r"\s+", " ", who).strip() if who else None
        q = P.say(r, P.QUOTE)
        a = f'Here is one I like: "{body}"' + (f" That was said by {who}." if who else "") + \
            " " + r.choice(["I hope it makes you smile.", "I hope you enjoy it.",
                            "It is a nice thought to keep in mind."])
        return q, a, "The user wants a quote. I share one and say who said it."

    def joke(self, r):
        setup, punch, why = r.choice(JOKES)
        q = P.say(r, P.JOKE)
        a = (r.choice(["Here is a joke for you.", "Sure, here is one.", "Okay, here is a joke."]) +
             f" {setup} {punch} {why} " +
             r.choice(["I hope it made you smile!", "I hope you liked it!", "Do you want to hear another one?"]))
        return q, a, "The user wants a joke. I tell a short one and say why it is funny."

    def fact(self, r):
        qs, a = r.choice(FACTS)
        return P.say(r, qs), a, "The user asks a general question. I give the fact I know, simply."

    def unknown(self, r):
        qs, why = r.choice(UNKNOWN)
        c = r.choice(self.countries)
        q = P.say(r, qs, n=c["name"], city=c["capital"])
        a = (r.choice(["I don't know that.", "I am sorry, I don't know that.", "I can't answer that, I'm afraid."]) +
             f" I am Clover, a small demo model, and {why}. " +
             r.choice(["I can tell you about countries and their capitals, explain the meaning of words, "
                       "do simple math, explain a few everyday things and tell short stories.",
                       "I can answer simple questions about countries and words, do small sums, tell a joke "
                       "or tell you a short story.",
                       "But I can tell you about a country, explain a word, work out a sum or tell you a story."]) +
             " " + r.choice(["Would you like one of those?", "What would you like to try?",
                             "Is there something else I can help with?"]))
        return q, a, "The user asks something I cannot know. I say so honestly and offer what I can do."

    def leaks(self, q: str) -> bool:
        """Whether user turn q is a held-out prompt (lower-case, punctuation dropped)."""
        n = norm(q)
        return n in self.banned or any(b in _space(n) for b in self.banned_in)

    TASKS = {"identity": identity, "country": country, "wiki": wiki_task, "define": define,
             "story": story, "math": math, "why": why, "quote": quote,
             "joke": joke, "fact": fact, "unknown": unknown}

    def single(self, r, kind=None):
        kinds, weights = zip(*[(k, w) for k, w in self.tasks if k != "multi"])
        kind = kind or r.choices(kinds, weights)[0]
        while True:
            q, a, t = self.TASKS[kind](self, r)
            if not self.leaks(q):
                return q, a, t

    def exchange(self, r):
        """([(role, text)...] ending with the assistant's answer, thought)."""
        kinds, weights = zip(*self.tasks)
        kind = r.choices(kinds, weights)[0]
        if kind != "multi":
            q, a, t = self.single(r, kind)
            return [("user", q), ("assistant", a)], t
        msgs = []
        if r.random() < 0.5 and self.smalltalk:
            turns = r.choice(self.smalltalk)["turns"]
            n = len(turns) - (len(turns) % 2)
            for i in range(0, min(n, 4), 2):
                if self.leaks(turns[i]):
                    break
                msgs += [("user", turns[i]), ("assistant", turns[i + 1])]
        for _ in range(r.randint(1, 2)):
            q, a, _ = self.single(r)
            msgs += [("user", q), ("assistant", a)]
        if r.random() < 0.25:               # a follow-up that leans on the turn before
            k = r.choice(["capital", "capital", "where", "borders", "about"])
            c1, c2 = r.sample(self.countries, 2) if len(self.countries) > 1 else self.countries * 2
            q, a, _ = self.country(r, c1, k)
            q2, a2, t = self.country(r, c2, k, follow=True)
            if not self.leaks(q) and not self.leaks(q2):
                return msgs + [("user", q), ("assistant", a), ("user", q2), ("assistant", a2)], t
        q, a, t = self.single(r)
        msgs += [("user", q), ("assistant", a)]
        return msgs, t

    @staticmethod
    def render(msgs, thought: str | None) -> tuple[str, str]:
        """(prompt up to the generation prompt, completion) as clover renders them."""
        out = []
        for role, text in msgs[:-1]:
            out.append(f"{IM_START}{role}\n{text.strip()}{IM_END}\n")
        out.append(f"{IM_START}assistant\n")
        ans = msgs[-1][1].strip()
        if thought is None:
            return "".join(out) + THINK_OFF, ans + IM_END + "\n"
        return "".join(out) + "<think>\n", f"{thought}\n</think>\n\n{ans}{IM_END}\n"

    def sample(self, r, think_p: float = 0.2) -> tuple[str, str]:
        msgs, t = self.exchange(r)
        return self.render(msgs, t if r.random() < think_p else None)

    def prose_doc(self, r, max_chars: int = 2400) -> str:
        """A run of consecutive paragraphs of one public-domain book (or wiki leads)."""
        if r.random() < 0.3:
            ws = [r.choice(self.wiki) for _ in range(3)]
            return "\n\n".join(f"{w['title']}\n{w['text']}" for w in ws)
        i = r.randrange(len(self.prose))
        src, out, n = self.prose[i]["src"], [], 0
        while i < len(self.prose) and self.prose[i]["src"] == src and n < max_chars:
            out.append(self.prose[i]["text"])
            n += len(out[-1])
            i += 1
        return "\n\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=26)
    a = ap.parse_args()
    g = Gen(load_corpus(a.corpus))
    r = random.Random(a.seed)
    for _ in range(a.n):
        p, c = g.sample(r)
        print(p + c + "-----")


if __name__ == "__main__":
    main()
