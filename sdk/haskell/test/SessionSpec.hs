{-# LANGUAGE OverloadedStrings #-}
{-# LANGUAGE ScopedTypeVariables #-}
-- | The session logic of an instance against a fake core (FakeCore.hs):
-- each test scripts the core's side and checks what the SDK wrote and did.
module SessionSpec (spec) where

import Control.Exception (Exception, throwIO, try)
import Control.Monad (void)
import qualified Data.ByteString as B
import qualified Data.ByteString.Char8 as BC
import Data.List (isInfixOf)
import qualified Data.Text as T
import Test.Hspec

import Cumulo
import Cumulo.Codec (Control (..), Hello (..), Message (..), Reply (..), Send (..), McastSent (..), Welcome (..))
import FakeCore

data FaultyError = FaultyError String deriving (Show)

instance Exception FaultyError

tidA, tidB :: TransId
tidA = TransId (B.replicate 15 0 <> B.singleton 1)
tidB = TransId (B.replicate 15 0 <> B.singleton 2)

request :: TransId -> T.Text -> B.ByteString -> Request
request t pattern body = Request
  { requestTransId = t, requestTimeout = 5000, requestPriority = 0, requestFlags = 1, requestSource = 42
  , requestName = pattern, requestPattern = pattern, requestInfo = "", requestBody = body }

-- | Expect SUBSCRIBE of @pattern@ and answer it OK.
acceptSubscribe :: Conn -> T.Text -> IO ()
acceptSubscribe conn pattern = do
  m <- recvMsg conn
  case m of
    MSubscribe (Control rid p) | p == pattern -> sendMsg conn [MReply (Reply rid 0 0 "")]
    other -> expectationFailure ("expected SUBSCRIBE " ++ show pattern ++ ", got " ++ show other)

unmanaged :: FilePath -> IO API
unmanaged path = connectUnmanaged path "/client/"

returned :: Conn -> IO Answer
returned conn = recvMsg conn >>= \m -> case m of
  MReturn a -> pure a
  other -> error ("expected RETURN, got " ++ show other)

spec :: Spec
spec = do
  it "says HELLO and takes WELCOME's values" $ do
    (hello, values) <- withFakeCore handshake $ \path -> withAPI (unmanaged path) $ \api ->
      pure (processIndex api, processCount api, threadCount api, prefix api, timeoutSync api, nodeId api,
            instanceId api, maxFrame api, keepalive api, priorityDefault api, window api)
    hello `shouldBe` Hello 1 1 0 "" "/client/"
    values `shouldBe` (0, 1, 1, "/tests/", 5000, 1, 7, 1024 * 1024, 5000, 0, 1)

  it "names every status of the protocol, and codes it does not know by number" $ do
    map statusName [statusOk, statusProtocol, statusUnavailable, 14]
      `shouldBe` ["OK", "PROTOCOL", "UNAVAILABLE", "STATUS_14"]
    statusUnavailable `shouldBe` 13

  it "throws the core's ERROR instead of WELCOME" $ do
    (_, r) <- withFakeCore (\c -> recvMsg c >> sendMsg c [MError statusUnauthorized "unknown token"]) $ \path ->
      try (connectUnmanaged path "/client/")
    either (\e -> (errorStatus e, errorMessage e)) (const (0, "")) (fmap (const ()) r)
      `shouldBe` (statusUnauthorized, "unknown token")

  it "subscribes, runs the handler for a REQUEST, and returns from poll on TERMINATE" $ do
    (a, more) <- withFakeCore
      (\c -> do
         void (handshake c)
         acceptSubscribe c "echo"
         sendMsg c [MRequest (request tidA "/tests/echo" "hi"), MTerminate 1000]
         returned c)
      (\path -> withAPI (unmanaged path) $ \api -> do
         subscribe api "echo" (\_ req -> pure ("k\0v\0", "got " <> requestBody req))
         poll api Nothing)
    a `shouldBe` Answer tidA statusOk "k\0v\0" "got hi"
    more `shouldBe` False

  it "answers SERVICE_ERROR naming the exception, and keeps serving" $ do
    ((failed, ok), _) <- withFakeCore
      (\c -> do
         void (handshake c)
         acceptSubscribe c "boom"
         sendMsg c [MRequest (request tidA "/tests/boom" "")]
         failed <- returned c
         sendMsg c [MRequest (request tidB "/tests/boom" "ok"), MTerminate 1000]
         ok <- returned c
         pure (failed, ok))
      (\path -> withAPI (unmanaged path) $ \api -> do
         subscribe api "boom" (\_ req -> if requestBody req == "ok" then pure ("", "ok")
                                          else throwIO (FaultyError "boom from haskell"))
         poll api Nothing >>= \more -> if more then void (poll api Nothing) else pure ())
    answerStatus failed `shouldBe` statusServiceError
    BC.unpack (answerBody failed) `shouldSatisfy` \m -> "FaultyError" `isInfixOf` m && "boom from haskell" `isInfixOf` m
    answerBody ok `shouldBe` "ok"

  it "answers NO_SERVICE for a pattern without a handler" $ do
    (a, _) <- withFakeCore
      (\c -> handshake c >> sendMsg c [MRequest (request tidA "/tests/none" ""), MTerminate 1000] >> returned c)
      (\path -> withAPI (unmanaged path) $ \api -> poll api Nothing)
    answerStatus a `shouldBe` statusNoService

  it "answers PING with PONG while polling, and returns True when the poll times out" $ do
    (pong, more) <- withFakeCore
      (\c -> handshake c >> sendMsg c [MPing 12345678901234567890] >> recvMsg c <* recvMsg c)
      (\path -> withAPI (unmanaged path) $ \api -> poll api (Just 300))
    pong `shouldBe` MPong 12345678901234567890
    more `shouldBe` True

  it "send_sync waits for its RESPONSE, answering PING and keeping a REQUEST for poll" $ do
    ((sent, pong, served), (answerOf, more)) <- withFakeCore
      (\c -> do
         void (handshake c)
         acceptSubscribe c "echo"
         sent <- recvMsg c
         let t = case sent of MSendSync s -> sendTransId s; _ -> tidA
         sendMsg c [MPing 1, MRequest (request tidB "/tests/echo" "later"), MResponse (Answer t 0 "i\0j\0" "pong")]
         pong <- recvMsg c
         served <- returned c
         sendMsg c [MTerminate 100]
         pure (sent, pong, served))
      (\path -> withAPI (unmanaged path) $ \api -> do
         subscribe api "echo" (\_ req -> pure ("", requestBody req))
         r <- sendSync api "/svc/x" "ping"
         more <- poll api Nothing
         pure (r, more))
    case sent of
      MSendSync s -> do
        (sendName s, sendRequest s, sendTimeout s, sendFlags s) `shouldBe` ("/svc/x", "ping", 0, 0)
        B.drop 8 (transIdBytes (sendTransId s)) `shouldBe` B.pack [0, 0, 0, 1, 0, 0, 0, 7]
      other -> expectationFailure ("expected SEND_SYNC, got " ++ show other)
    pong `shouldBe` MPong 1
    answerBody served `shouldBe` "later"
    answerOf `shouldBe` ("i\0j\0", "pong")
    more `shouldBe` False

  it "send_sync throws the status and message of an error RESPONSE" $ do
    (_, r) <- withFakeCore
      (\c -> do
         void (handshake c)
         MSendSync s <- recvMsg c
         sendMsg c [MResponse (Answer (sendTransId s) statusNoService "" "no service /nobody")])
      (\path -> withAPI (unmanaged path) $ \api -> try (sendSync api "/nobody" ""))
    either (\e -> (errorStatus e, errorMessage e)) (const (0, "")) r `shouldBe` (statusNoService, "no service /nobody")

  it "send_async then recv_async, by trans_id and the next one; trans_ids grow" $ do
    (_, (t1, t2, r2, r1)) <- withFakeCore
      (\c -> do
         void (handshake c)
         MSendAsync s1 <- recvMsg c
         MSendAsync s2 <- recvMsg c
         sendMsg c [MResponse (Answer (sendTransId s1) 0 "" "one"), MResponse (Answer (sendTransId s2) statusTimeout "" "late")])
      (\path -> withAPI (unmanaged path) $ \api -> do
         t1 <- sendAsyncWith api defaultSend {optPriority = Just (-3), optWaitForService = True} "/a" "1"
         t2 <- sendAsync api "/b" "2"
         r2 <- recvAsync api (Just t2) Nothing
         r1 <- recvAsync api Nothing Nothing
         pure (t1, t2, r2, r1))
    t1 < t2 `shouldBe` True
    (answerStatus r2, answerBody r2) `shouldBe` (statusTimeout, "late")
    (answerTransId r1, answerBody r1) `shouldBe` (t1, "one")

  it "mcast_async returns the copies' trans_ids" $ do
    (_, ids) <- withFakeCore
      (\c -> do
         void (handshake c)
         MMcastAsync s <- recvMsg c
         sendMsg c [MMcastSent (McastSent (sendTransId s) [tidA, tidB])])
      (\path -> withAPI (unmanaged path) $ \api -> mcastAsync api "/all" "x")
    ids `shouldBe` [tidA, tidB]

  it "forward sends FORWARD with the request's trans_id and no RETURN" $ do
    ((fwd, next), _) <- withFakeCore
      (\c -> do
         void (handshake c)
         acceptSubscribe c "fwd"
         sendMsg c [MRequest (request tidA "/tests/fwd" "body"), MTerminate 100]
         fwd <- recvMsg c
         next <- recvMsg c
         pure (fwd, next))
      (\path -> withAPI (unmanaged path) $ \api -> do
         subscribe api "fwd" (\a req -> forward a req "/other" "k\0v\0" "new" Nothing Nothing >> pure ("", "ignored"))
         poll api Nothing)
    fwd `shouldBe` MForward (Send tidA 0 0 0 "/other" "k\0v\0" "new")
    next `shouldBe` MGoodbye

  -- PROTOCOL.md 5.1: a handler's sends and forward inherit the traceparent and
  -- tracestate of the request it handles, after the pairs it gave; a
  -- handler-given traceparent is kept; a request without one, a failed
  -- handler's context, and a call outside any handler add nothing.
  it "a handler's calls carry its request's trace context" $ do
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        trace = infoEncode [("traceparent", parent), ("tracestate", "congo=t61rcWkgMzE")]
        parentOnly = infoEncode [("traceparent", parent)]
        own = infoEncode [("traceparent", "00-own")]
        withInfo info r = r {requestInfo = info}
    (infos, _) <- withFakeCore
      (\c -> do
         void (handshake c)
         acceptSubscribe c "echo"
         acceptSubscribe c "boom"
         sendMsg c [MRequest (withInfo ("a\0" <> "1\0" <> trace) (request tidA "/tests/echo" ""))]
         MSendSync sync <- recvMsg c
         sendMsg c [MResponse (Answer (sendTransId sync) 0 "" "")]
         MSendAsync async <- recvMsg c
         MMcastAsync mcast <- recvMsg c
         sendMsg c [MMcastSent (McastSent (sendTransId mcast) [])]
         MSendAsync kept <- recvMsg c
         MForward forwarded <- recvMsg c
         -- a traceparent without tracestate; a handler that fails: its context goes with it
         sendMsg c [MRequest (withInfo parentOnly (request tidB "/tests/boom" ""))]
         MSendAsync boom <- recvMsg c
         failed <- returned c
         answerStatus failed `shouldBe` statusServiceError
         -- a request without traceparent
         sendMsg c [MRequest (withInfo "tracestate\0x=1\0" (request tidA "/tests/echo" ""))]
         MSendAsync plain <- recvMsg c
         _ <- returned c
         sendMsg c [MTerminate 100]
         MSendAsync outside <- recvMsg c
         pure (map sendInfo [sync, async, mcast, kept, forwarded, boom, plain, outside]))
      (\path -> withAPI (unmanaged path) $ \api -> do
         subscribe api "echo" $ \a req -> do
           case infoLookup "traceparent" (requestInfo req) of
             Nothing -> void (sendAsyncWith a defaultSend {optInfo = requestInfo req} "/plain" "")
             Just _ -> do
               void (sendSync a "/s" "")
               void (sendAsyncWith a defaultSend {optInfo = "k\0v\0"} "/a" "")
               void (mcastAsync a "/m" "")
               void (sendAsyncWith a defaultSend {optInfo = own} "/own" "")
               forward a req "/f" "" "" Nothing Nothing
           pure ("", "")
         subscribe api "boom" (\a _ -> sendAsync a "/b" "" >> throwIO (FaultyError "boom"))
         void (poll api Nothing)
         void (sendAsync api "/outside" ""))
    infos `shouldBe` [trace, "k\0v\0" <> trace, trace, own, trace, parentOnly, "tracestate\0x=1\0", ""]

  it "refuses a send over max_frame locally with TOO_LARGE; the connection stays up" $ do
    (_, (r, ok)) <- withFakeCore
      (\c -> do
         void (handshake c)
         MSendSync s <- recvMsg c
         sendMsg c [MResponse (Answer (sendTransId s) 0 "" "fine")])
      (\path -> withAPI (unmanaged path) $ \api -> do
         r <- try (sendAsync api "/big" (B.replicate (1024 * 1024 + 1) 0))
         ok <- sendSync api "/small" ""
         pure (either (Just . errorStatus) (const Nothing) r, ok))
    r `shouldBe` Just statusTooLarge
    ok `shouldBe` ("", "fine")

  it "subscribe throws the REPLY's error; subscribe_count gives its value" $ do
    (_, (r, n)) <- withFakeCore
      (\c -> do
         void (handshake c)
         MSubscribe (Control rid _) <- recvMsg c
         sendMsg c [MReply (Reply rid statusInvalidArgument 0 "bad pattern")]
         MSubscribeCount (Control rid2 p) <- recvMsg c
         sendMsg c [MReply (Reply rid2 0 (if p == "a" then 2 else 0) "")])
      (\path -> withAPI (unmanaged path) $ \api -> do
         r <- try (subscribe api "a**" (\_ _ -> pure ("", "")))
         n <- subscribeCount api "a"
         pure (either (Just . errorStatus) (const Nothing) r, n))
    r `shouldBe` Just statusInvalidArgument
    n `shouldBe` 2

  it "close says GOODBYE and closes" $ do
    ((bye, closed), _) <- withFakeCore
      (\c -> handshake c >> ((,) <$> recvMsg c <*> closedByPeer c))
      (\path -> unmanaged path >>= close)
    bye `shouldBe` MGoodbye
    closed `shouldBe` True

  it "encodes and parses key/value info" $ do
    infoEncode [("a", "1"), ("a", "")] `shouldBe` "a\NUL1\NULa\NUL\NUL"
    infoParse "value\NUL42\NUL" `shouldBe` Right [("value", "42")]
    fmap (const ()) (infoParse "x\0") `shouldSatisfy` either ((== statusMalformed) . errorStatus) (const False)
    infoLookup "value" "a\NULb\NULvalue\NUL7\NUL" `shouldBe` Just "7"
    welcomePrefix welcome `shouldBe` "/tests/"
