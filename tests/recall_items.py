"""The planted facts of the recall set (tests/recall_corpus.py places them in a long group chat).

Written by hand so that each kind is hard the way real conversations are (issue #20):
- NEIGHBOUR: the question's words are in the turn before the answer, none in the answer;
- MULTI: the answer needs two or three turns said on different days;
- PERSON: said in the first person, asked about in the third;
- PARAPHRASE: asked in other words (at most one content word shared with the answer);
- SAGAS (the `dated` kind): one person on one topic in five periods; a question names a
  period, and the other four statements compete with the right one.
Never taken from public benchmark sets.
"""

from __future__ import annotations

# The people of the group and their Telegram user ids.
PEOPLE = {"Mel": 201, "Caroline": 202, "Anna": 203, "Boris": 204}

# (cue speaker, cue, answer speaker, answer, question, topic). The topic is a word of the
# question that the filler and the near misses also use.
NEIGHBOUR: tuple[tuple[str, str, str, str, str, str], ...] = (
    (
        "Caroline",
        "Mel, I heard you went to the concert on Saturday!",
        "Mel",
        "Amazing, the whole debut record start to finish, plus two encores.",
        "what did they play at the concert Mel went to?",
        "concert",
    ),
    (
        "Anna",
        "Boris, how did the job interview go?",
        "Boris",
        "Three hours, five people and a whiteboard exercise. They ring back next week.",
        "how did Boris's job interview go?",
        "interview",
    ),
    (
        "Mel",
        "Caroline, what did the vet say about the cat's leg?",
        "Caroline",
        "Just a sprain. Two weeks of rest and no jumping on the sofa.",
        "what did the vet say about Caroline's cat's leg?",
        "vet",
    ),
    (
        "Boris",
        "Anna, I saw your posts from the wedding in Porto.",
        "Anna",
        "Gorgeous. Ceremony on a cliff, and I cried through the vows.",
        "what was the wedding in Porto like for Anna?",
        "wedding",
    ),
    (
        "Caroline",
        "Saw your photos from the marathon, Boris! What was your time?",
        "Boris",
        "Finished in 3:52, my knees are still complaining.",
        "what was Boris's time in the marathon?",
        "marathon",
    ),
    (
        "Anna",
        "Mel, did you end up buying the flat on Kingsley Road?",
        "Mel",
        "We lost it, someone offered twenty grand more.",
        "did Mel buy the flat on Kingsley Road?",
        "flat",
    ),
    (
        "Mel",
        "Boris, what did your doctor tell you about the headaches?",
        "Boris",
        "Probably my screen. New glasses and fewer late nights.",
        "what did the doctor tell Boris about his headaches?",
        "doctor",
    ),
    (
        "Caroline",
        "Back from the pottery workshop.",
        "Caroline",
        "Came home with a lopsided bowl and a mug whose handle actually holds.",
        "what did Caroline make at the pottery workshop?",
        "pottery",
    ),
    (
        "Boris",
        "Anna, what do you think of the new manager?",
        "Anna",
        "Sharp, a bit cold, answers emails at midnight.",
        "what does Anna think of her new manager?",
        "manager",
    ),
    (
        "Anna",
        "Welcome back from the camping trip, Caroline.",
        "Caroline",
        "Rained for two days straight and the tent leaked, but the lake was stunning.",
        "how was Caroline's camping trip?",
        "camping",
    ),
    (
        "Mel",
        "Did you finish the book I lent you, Anna?",
        "Anna",
        "That ending made me furious, the detective was the brother all along!",
        "what did Anna think of the book Mel lent her?",
        "book",
    ),
    (
        "Caroline",
        "Boris, what birthday present did you get your father?",
        "Boris",
        "A weekend in a lighthouse on the coast, he loved it.",
        "what present did Boris give his father for his birthday?",
        "present",
    ),
    (
        "Anna",
        "Mel, I heard you finally went to the dentist.",
        "Mel",
        "Two fillings and a lecture about flossing.",
        "what happened at Mel's dentist visit?",
        "dentist",
    ),
    (
        "Boris",
        "Caroline finally moved into the new apartment, I see.",
        "Caroline",
        "Tiny kitchen, huge balcony, and the neighbours practise trombone.",
        "what is Caroline's new apartment like?",
        "apartment",
    ),
    (
        "Mel",
        "Anna, what did you decide about the car?",
        "Anna",
        "Keeping the old one another year, the repair was only 300.",
        "what did Anna decide about her car?",
        "car",
    ),
    (
        "Caroline",
        "Boris, any news from the landlord about the heating?",
        "Boris",
        "A technician comes on Thursday, finally.",
        "what did the landlord say about Boris's heating?",
        "landlord",
    ),
    (
        "Anna",
        "Caroline, how did the exam go?",
        "Caroline",
        "Passed! 86 out of 100, top of my group.",
        "how did Caroline do in her exam?",
        "exam",
    ),
    (
        "Boris",
        "Tried that new ramen place near the station.",
        "Boris",
        "Broth too salty, noodles perfect, I won't queue an hour again.",
        "what did Boris think of the ramen place near the station?",
        "ramen",
    ),
    (
        "Mel",
        "Caroline, what theme did the kids pick for the party?",
        "Caroline",
        "Dinosaurs, obviously. I'm baking a volcano cake.",
        "what theme did Caroline's kids pick for the party?",
        "party",
    ),
    (
        "Anna",
        "Mel, welcome back from Tokyo! Long flight?",
        "Mel",
        "Fourteen hours next to a crying baby, never again.",
        "how was Mel's flight back from Tokyo?",
        "flight",
    ),
    (
        "Caroline",
        "Anna, did the bank approve the loan?",
        "Anna",
        "Yes, at 4.1 percent over twenty years.",
        "did the bank approve Anna's loan?",
        "loan",
    ),
    (
        "Boris",
        "Heard you played in the chess tournament, Mel.",
        "Mel",
        "Won four games, lost two, and got a draw against the top seed.",
        "how did Mel do at the chess tournament?",
        "chess",
    ),
    (
        "Mel",
        "The garden finally got its makeover this weekend.",
        "Mel",
        "Tomatoes along the fence, herbs by the door, and a tiny pond.",
        "what did Mel plant in the garden?",
        "garden",
    ),
    (
        "Anna",
        "Boris, how's your sister's new bakery doing?",
        "Boris",
        "Sold out by noon every day, she's hiring two more people.",
        "how is the bakery of Boris's sister doing?",
        "bakery",
    ),
)

# (speaker, what they said in the first person, the question in the third, topic)
PERSON: tuple[tuple[str, str, str, str], ...] = (
    ("Caroline", "I started painting again last month, watercolours mostly.",
     "When did Caroline start painting?", "painting"),
    ("Mel", "I've been vegetarian for six years now.", "How long has Mel been vegetarian?",
     "vegetarian"),
    ("Anna", "My brother moved to Canada in the spring.", "Where did Anna's brother move?",
     "brother"),
    ("Boris", "I'm learning Portuguese for the trip to Brazil.",
     "What language is Boris learning?", "language"),
    ("Caroline", "I volunteer at the animal shelter every Sunday.",
     "Where does Caroline volunteer on Sundays?", "shelter"),
    ("Mel", "My daughter just turned seven, she wants a telescope.",
     "How old is Mel's daughter?", "daughter"),
    ("Anna", "I ran my first half marathon in under two hours!",
     "Has Anna ever run a half marathon?", "marathon"),
    ("Boris", "I quit smoking in January and haven't touched one since.",
     "When did Boris quit smoking?", "smoking"),
    ("Caroline", "I'm allergic to penicillin, found out the hard way.",
     "What is Caroline allergic to?", "allergic"),
    ("Mel", "I work night shifts at the hospital lab.", "Where does Mel work?", "hospital"),
    ("Anna", "I grew up in a small town near Krakow.", "Where did Anna grow up?", "town"),
    ("Boris", "My favourite band is still Radiohead, always will be.",
     "What is Boris's favourite band?", "band"),
    ("Caroline", "I'm saving up for a trip to Iceland next winter.",
     "What is Caroline saving up for?", "trip"),
    ("Mel", "I joined a climbing gym near the office.", "What gym did Mel join?", "gym"),
    ("Anna", "My grandmother taught me to knit when I was nine.", "Who taught Anna to knit?",
     "knit"),
    ("Boris", "I adopted a greyhound from a rescue, his name is Pepper.",
     "What is the name of Boris's dog?", "dog"),
    ("Caroline", "I've never been on a plane, honestly terrified of flying.",
     "Is Caroline afraid of flying?", "flying"),
    ("Mel", "I coach my son's football team on Saturdays.", "Which team does Mel coach?",
     "football"),
    ("Anna", "I switched to decaf after the heart scare.", "Why did Anna switch to decaf?",
     "decaf"),
    ("Boris", "I'm building a canoe in the garage, slowly.",
     "What is Boris building in his garage?", "garage"),
    ("Caroline", "My cousin is coming to live with us in May.",
     "Who is moving in with Caroline?", "cousin"),
    ("Mel", "I failed my driving test twice before passing.",
     "How many times did Mel fail the driving test?", "driving"),
)  # fmt: skip

# (speaker, the fact, the question in other words, topic)
PARAPHRASE: tuple[tuple[str, str, str, str], ...] = (
    ("Mel", "Sold the old bike to our neighbour for fifty quid.", "Who bought Mel's bicycle?",
     "bicycle"),
    ("Boris", "Got a promotion, I'm team lead from next month.",
     "Did Boris get promoted at work?", "work"),
    ("Anna", "We're expecting a baby in October!", "Is Anna pregnant?", "baby"),
    ("Caroline", "The doctor put me on antibiotics for a week.",
     "What medicine is Caroline taking?", "medicine"),
    ("Mel", "Our flight got cancelled so we drove all the way to Munich.",
     "How did Mel reach Munich when the plane was grounded?", "plane"),
    ("Boris", "I'm off sugar completely, lost eight kilos.", "How much weight has Boris lost?",
     "weight"),
    ("Anna", "The kitchen renovation ran three weeks over.", "Was Anna's kitchen remodel delayed?",
     "kitchen"),
    ("Caroline", "Passed my driving test on the first try!",
     "Does Caroline have a driving licence now?", "licence"),
    ("Mel", "I'm terrified of spiders, can't even look at pictures.",
     "Is Mel afraid of spiders?", "spiders"),
    ("Boris", "My landlord is raising the rent by 15 percent.",
     "How much more will Boris pay his landlord?", "rent"),
    ("Anna", "Took the kids to the seaside for the long weekend.",
     "Where did Anna take the children on the holiday weekend?", "holiday"),
    ("Caroline", "I handed in my notice on Friday.", "When did Caroline resign?", "job"),
    ("Mel", "Our boiler died and we had cold showers for a week.",
     "How long was Mel without hot water when the boiler broke?", "boiler"),
    ("Boris", "I finally got my citizenship, the ceremony is next month.",
     "Is Boris a citizen now?", "citizen"),
    ("Anna", "My phone screen cracked when I dropped it on the tram.",
     "How did Anna break her phone?", "phone"),
    ("Caroline", "The twins start primary school in September.",
     "When do Caroline's kids begin school?", "school"),
    ("Mel", "I'm allergic to cats, I sneeze for hours.", "Can Mel be around cats?", "cats"),
    ("Boris", "We got engaged on the beach in Crete!", "Where did Boris get engaged?",
     "engaged"),
    ("Anna", "I twisted my ankle playing volleyball.", "How did Anna injure her ankle?",
     "ankle"),
    ("Caroline", "We repainted the living room a dark green.",
     "What colour did Caroline choose for the lounge?", "colour"),
    ("Mel", "Cancelled the gym, I run in the park instead.", "Does Mel still go to the gym?",
     "gym"),
    ("Boris", "My car failed its inspection, the brakes are shot.",
     "What is wrong with Boris's car?", "car"),
)  # fmt: skip

# (question, topic, parts in the order they were said, each (speaker, text) on another day)
MULTI: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("What instruments does Mel play, and since when?", "guitar", (
        ("Mel", "Been playing guitar since I was twelve, still my favourite."),
        ("Mel", "Cello lessons started last week; playing it is nothing like guitar."),
    )),
    ("Which countries did Anna visit on her trips this year?", "trip", (
        ("Anna", "My trip to Portugal was lovely, I ate my weight in pastries."),
        ("Anna", "Another trip done: Greece, island hopping for ten days."),
        ("Anna", "Visited Japan for two weeks, the jet lag is brutal."),
    )),
    ("What pets does Caroline have?", "pets", (
        ("Caroline", "Pets update: Biscuit the cat has claimed the sofa."),
        ("Caroline", "We got a second pet, a rabbit called Toffee."),
    )),
    ("Where has Boris worked?", "work", (
        ("Boris", "Worked at the bank for five years, done with it now."),
        ("Boris", "First week of work at the startup, chaos but fun."),
    )),
    ("What languages is Caroline studying?", "languages", (
        ("Caroline", "Studying Spanish on the train every morning."),
        ("Caroline", "Added Italian to my studies, the two get mixed up."),
    )),
    ("Which books did Anna recommend?", "books", (
        ("Anna", "I recommend The Overstory, it changed how I see trees."),
        ("Anna", "Another book for you all: Piranesi, short and strange."),
    )),
    ("What sports does Boris do, and how often?", "sports", (
        ("Boris", "Swimming twice a week now, best sport for my back."),
        ("Boris", "Tennis on Sundays with my brother, the sport I actually enjoy."),
    )),
    ("How did Mel's house move go?", "move", (
        ("Mel", "The move is set for the 14th, boxes everywhere."),
        ("Mel", "The house is a mess, but we're in."),
    )),
    ("What did Caroline cook for her dinner parties?", "dinner", (
        ("Caroline", "Dinner party went great, the lamb tagine was a hit."),
        ("Caroline", "Second dinner party: risotto for eight, never again."),
    )),
    ("What courses has Anna taken?", "course", (
        ("Anna", "Signed up for an evening course in photography."),
        ("Anna", "My coding course ends next week, final project due."),
    )),
    ("What cars has Boris owned?", "car", (
        ("Boris", "My first car was a rusty Fiat Panda."),
        ("Boris", "Bought a used Volvo estate, the car smells of dog."),
    )),
    ("What concerts did Mel go to this year?", "concert", (
        ("Mel", "The concert at the arena: Massive Attack, unreal."),
        ("Mel", "Went to a tiny jazz concert in a church."),
    )),
    ("What has Caroline grown on her allotment?", "allotment", (
        ("Caroline", "The allotment gave us twelve courgettes this week."),
        ("Caroline", "Pumpkins on the allotment are enormous now."),
        ("Caroline", "Grown my first garlic, small but mine."),
    )),
    ("Which jobs did Anna apply for?", "job", (
        ("Anna", "Applied for the museum curator job."),
        ("Anna", "Applied to the council too, project manager this time."),
    )),
    ("What did Boris say about his knee surgery and the recovery?", "knee", (
        ("Boris", "Knee surgery is booked for the 3rd."),
        ("Boris", "Recovery is slow, physio three times a week."),
    )),
    ("Which films did Mel like at the festival?", "festival", (
        ("Mel", "Festival day one: the Korean thriller was brilliant."),
        ("Mel", "Festival favourite so far is the Danish comedy."),
    )),
    ("What are Caroline's kids called?", "kids", (
        ("Caroline", "Leo, my eldest kid, starts football this week."),
        ("Caroline", "Maya, our youngest kid, is four today."),
    )),
    ("Which races did Anna run?", "race", (
        ("Anna", "Ran the city 10k race in 52 minutes."),
        ("Anna", "Trail race at the weekend, mud up to my knees."),
    )),
    ("What did Boris fix in the flat?", "flat", (
        ("Boris", "Fixed the leaking tap myself, YouTube is a miracle."),
        ("Boris", "Also fixed the wobbly shelf in the flat."),
    )),
    ("What gifts did Mel get for her birthday?", "birthday", (
        ("Mel", "Birthday haul: a record player from my sister!"),
        ("Mel", "Best birthday gift was the hot air balloon voucher."),
    )),
    ("Where did Caroline go hiking?", "hiking", (
        ("Caroline", "Hiking in the Dolomites, legs destroyed."),
        ("Caroline", "Another hike: the coastal path in Cornwall, windy but gorgeous."),
    )),
    ("What did Anna say about her new neighbours?", "neighbours", (
        ("Anna", "The new neighbours brought us cookies, sweet of them."),
        ("Anna", "Neighbours had a party till 3am, less sweet."),
    )),
)  # fmt: skip

# The periods a dated question may name: (since, until) ISO dates, until exclusive, and how
# people say it (the chat ends in February 2026).
PERIODS: tuple[tuple[str, str, str], ...] = (
    ("2025-01-01", "2025-03-01", "at the start of last year"),
    ("2025-03-01", "2025-06-01", "last spring"),
    ("2025-06-01", "2025-09-01", "last summer"),
    ("2025-09-01", "2025-12-01", "in the autumn"),
    ("2025-12-01", "2026-03-01", "this winter"),
)

# (speaker, topic, what they said in each period of PERIODS, the questions: (period, text))
SAGAS: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[int, str], ...]], ...] = (
    ("Anna", "deposit", (
        "The landlord says the deposit comes back in full if we paint the hallway.",
        "Still no deposit, the agency keeps asking for the meter photos.",
        "They kept 200 of the deposit for the carpet, I'm furious.",
        "Got the rest of the deposit after the small claims letter.",
        "The new flat wants a deposit of two months, ridiculous.",
    ), ((2, "what did Anna say about the deposit last summer?"),
        (4, "what did Anna say about the deposit this winter?"))),
    ("Boris", "diet", (
        "Day three of the diet, I dream about bread.",
        "The diet is working, down four kilos.",
        "Diet on pause, it's barbecue season.",
        "Back on the diet, no sugar at all this time.",
        "Gave up the diet, Christmas won.",
    ), ((1, "how was Boris's diet going last spring?"),
        (3, "what did Boris say about his diet in the autumn?"))),
    ("Mel", "novel", (
        "Wrote the first chapter of my novel, it's awful but it exists.",
        "The novel is at 30,000 words, the middle is sagging.",
        "Sent the novel to three agents, fingers crossed.",
        "Two agents passed on the novel, one wants the full manuscript.",
        "An agent signed my novel! Edits from January.",
    ), ((2, "what did Mel say about her novel last summer?"),
        (3, "what news was there about Mel's novel in the autumn?"))),
    ("Caroline", "bathroom", (
        "Got three quotes for the bathroom, all insane.",
        "The bathroom is stripped to the bricks, we shower at the gym.",
        "Tiles for the bathroom are back-ordered until August.",
        "The bathroom is done, the grout is perfect.",
        "Found a leak under the new bathroom floor, of course.",
    ), ((1, "what was happening with Caroline's bathroom last spring?"),
        (4, "what did Caroline say about the bathroom this winter?"))),
    ("Anna", "choir", (
        "Joined the choir, I'm an alto apparently.",
        "Choir concert on Friday, we're singing Faure.",
        "The choir is off for the holidays, I miss it.",
        "The choir director quit, total chaos.",
        "Our choir sang at the Christmas market, freezing but lovely.",
    ), ((0, "what did Anna say about the choir at the start of last year?"),
        (3, "what happened with Anna's choir in the autumn?"))),
    ("Boris", "van", (
        "The van needs new tyres before the trip.",
        "The van broke down on the motorway, towed home.",
        "Took the van to the coast, slept in the back, perfect.",
        "Selling the van, anyone interested?",
        "The van is gone, sold it to a surfer.",
    ), ((1, "what happened to Boris's van last spring?"),
        (4, "what did Boris say about the van this winter?"))),
    ("Mel", "running club", (
        "Running club at 7am on Saturdays, who am I.",
        "Running club did hill reps today, I nearly died.",
        "Skipping running club, too hot to breathe.",
        "Running club relay, we came second.",
        "Running club in the snow, only four of us showed up.",
    ), ((2, "what did Mel say about running club last summer?"),
        (0, "what did Mel say about the running club at the start of last year?"))),
    ("Caroline", "mum", (
        "Mum's hip operation went fine, she's grumpy in hospital.",
        "Mum is walking with a stick now.",
        "Mum did the whole beach walk without the stick!",
        "Mum had a fall, nothing broken, but she's shaken.",
        "Mum does physio twice a week, getting stronger.",
    ), ((2, "how was Caroline's mum doing last summer?"),
        (3, "what did Caroline say about her mum in the autumn?"))),
    ("Anna", "wedding", (
        "My sister set the wedding date, September in Lisbon.",
        "Wedding dress shopping with my sister, six hours.",
        "My sister's wedding budget doubled, the caterer is a crook.",
        "The wedding was perfect, I gave a speech and nobody cried.",
        "The wedding photos finally arrived, I look awful in all of them.",
    ), ((1, "what did Anna say about her sister's wedding last spring?"),
        (4, "what did Anna say about the wedding this winter?"))),
    ("Boris", "startup", (
        "The startup pitch went well, they want a second meeting.",
        "The startup got funding, we're hiring.",
        "The startup is in chaos, half the engineers quit.",
        "The startup moved into a proper office.",
        "The startup is doing layoffs, I'm safe for now.",
    ), ((0, "what did Boris say about the startup at the start of last year?"),
        (2, "how was Boris's startup doing last summer?"))),
    ("Mel", "roof", (
        "The roof is leaking again, bucket in the attic.",
        "The roofer finally came, says the whole roof needs replacing.",
        "Roof replacement started, scaffolding everywhere.",
        "The new roof is done and the attic is dry.",
        "Snow on the new roof, not a single drip.",
    ), ((1, "what did Mel say about the roof last spring?"),
        (3, "what did Mel say about her roof in the autumn?"))),
)  # fmt: skip
